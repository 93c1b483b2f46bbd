/*
 * trn_loss.c: margin losses of a binary classifier, l(z) with z = y f(x)
 * and y in {-1, +1}, and their derivatives.
 *
 * label_em learns from labels flipped by the label exponential mechanism,
 * and a symmetric loss (l(z) + l(-z) constant) is what makes that noise
 * harmless: under symmetric noise its risk is an affine function of the
 * clean risk, so both have the same minimiser (Charoenphakdee, Lee and
 * Sugiyama, "On symmetric losses for learning from corrupted labels", ICML
 * 2019; restated by Bi and Suppakitpaisarn 2022, §II-A; docs/label_em.md).  The sigmoid, ramp and unhinged losses are symmetric on the
 * whole line; the barrier hinge is convex and symmetric on [-r, r] only.
 * Hinge, logistic and squared are the usual non-symmetric baselines the
 * paper compares with.
 *
 * At a kink the derivative returned is the right derivative.  For a convex
 * loss (hinge, barrier hinge) that is an element of the subdifferential;
 * for the ramp it is the slope of the piece starting there.
 */
#include <math.h>
#include <string.h>

#include "trn.h"

static const struct {
	trn_loss_kind kind;
	const char *name;
	bool symmetric;
} loss_names[] = {
	{ TRN_LOSS_BARRIER_HINGE, "barrier_hinge", false },
	{ TRN_LOSS_HINGE, "hinge", false },
	{ TRN_LOSS_LOGISTIC, "logistic", false },
	{ TRN_LOSS_SIGMOID, "sigmoid", true },
	{ TRN_LOSS_RAMP, "ramp", true },
	{ TRN_LOSS_SQUARED, "squared", false },
	{ TRN_LOSS_UNHINGED, "unhinged", true },
};

#define N_LOSSES (sizeof(loss_names) / sizeof(loss_names[0]))

int trn_loss_from_name(const char *name, trn_loss_kind *ret)
{
	if (!name)
		return -1;
	for (size_t i = 0; i < N_LOSSES; i++)
		if (strcmp(name, loss_names[i].name) == 0) {
			*ret = loss_names[i].kind;
			return 0;
		}
	return -1;
}

const char *trn_loss_name(trn_loss_kind kind)
{
	for (size_t i = 0; i < N_LOSSES; i++)
		if (loss_names[i].kind == kind)
			return loss_names[i].name;
	return NULL;
}

bool trn_loss_is_symmetric(trn_loss_kind kind)
{
	for (size_t i = 0; i < N_LOSSES; i++)
		if (loss_names[i].kind == kind)
			return loss_names[i].symmetric;
	return false;
}

/*
 * The barrier hinge of Charoenphakdee et al. 2019 (Bi and Suppakitpaisarn
 * 2022, Definition 3), f_{b,r}(z) = max(-b(r+z) + r,
 * max(b(z-r), r-z)) on the margin z, for b > 1, r > 0.  Three affine
 * pieces: r - z (slope -1) on [t0, r], where l(z) + l(-z) = 2r on [-r, r];
 * the barrier b(z - r) (slope b) above r, which stops margins from growing
 * past r; and r - b(r + z) (slope -b) below t0 = -r - r/(b-1), where it
 * overtakes r - z.  The minimum is l(r) = 0.
 */
static double barrier_hinge(double b, double r, double z, double *ret_deriv)
{
	double left = -b * (r + z) + r, barrier = b * (z - r), mid = r - z;
	double t0 = -r - r / (b - 1.0);

	*ret_deriv = z >= r ? b : (z < t0 ? -b : -1.0);
	return fmax(left, fmax(barrier, mid));
}

/* sigma(-z) = 1 / (1 + e^z) without overflow, for either sign of z. */
static double logistic_of_minus(double z)
{
	return z >= 0 ? exp(-z) / (1.0 + exp(-z)) : 1.0 / (1.0 + exp(z));
}

double trn_loss_eval(const trn_loss *loss, double z, double *ret_deriv)
{
	double v, d, s;

	switch (loss->kind) {
	case TRN_LOSS_BARRIER_HINGE:
		v = barrier_hinge(loss->b, loss->r, z, &d);
		break;
	case TRN_LOSS_HINGE: /* max(0, 1 - z) */
		v = z < 1.0 ? 1.0 - z : 0.0;
		d = z < 1.0 ? -1.0 : 0.0;
		break;
	case TRN_LOSS_LOGISTIC: /* log(1 + e^-z), stable for either sign */
		v = z >= 0 ? log1p(exp(-z)) : -z + log1p(exp(z));
		d = -logistic_of_minus(z);
		break;
	case TRN_LOSS_SIGMOID: /* sigma(-z) = 1 / (1 + e^z); l(z) + l(-z) = 1 */
		s = logistic_of_minus(z);
		v = s;
		d = -s * (1.0 - s);
		break;
	case TRN_LOSS_RAMP: /* clamp((1 - z) / 2, 0, 1); l(z) + l(-z) = 1 */
		if (z < -1.0) {
			v = 1.0;
			d = 0.0;
		} else if (z < 1.0) {
			v = 0.5 * (1.0 - z);
			d = -0.5;
		} else {
			v = 0.0;
			d = 0.0;
		}
		break;
	case TRN_LOSS_SQUARED: /* (1 - z)^2 */
		v = (1.0 - z) * (1.0 - z);
		d = -2.0 * (1.0 - z);
		break;
	case TRN_LOSS_UNHINGED: /* 1 - z (van Rooyen et al. 2015); l(z) + l(-z) = 2 */
		v = 1.0 - z;
		d = -1.0;
		break;
	default:
		v = NAN;
		d = NAN;
		break;
	}
	if (ret_deriv)
		*ret_deriv = d;
	return v;
}
