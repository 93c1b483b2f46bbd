/*
 * trn_pate_run.c: one run of the `pate` trainer (Papernot et al., ICLR
 * 2018, Section 2 and Algorithms 1-2): teachers trained without privacy on
 * disjoint random parts of the private rows, their votes on public student
 * rows aggregated by mech_pate_run_query, the smooth-sensitivity release of
 * the data-dependent RDP (Appendix B.5), and a student trained on the
 * released labels.
 *
 * What leaves this file computed from private rows: the aggregator's
 * labels and its counts of checks and answers (each priced by the job's
 * event), and the GNSS release.  Teachers, their votes, their accuracy and
 * the raw data-dependent RDP stay here.  Everything the student does is a
 * function of released labels and public rows: post-processing.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trn_internal.h"

/* The state of one run. */
struct pate_run {
	const trn_pate_params *p;
	const trn_dataset *train, *student, *test;
	mech_rng *rng;
	trn_pate_progress_fn progress;
	void *user;
	const atomic_bool *cancel;
	mech_pate_cfg cfg;
	trn_pate_progress prog;
	uint32_t k;          /* classes */
	double *votes;       /* queries x k: the teachers' histograms (private) */
	int64_t *labels;     /* queries: -1 abstain */
	trn_pate_result *res;
	bool stopped;        /* the progress callback asked to stop */
};

static bool cancelled(const struct pate_run *r)
{
	return r->stopped || (r->cancel && atomic_load(r->cancel));
}

/* Reports progress; true (and the run stops) when the callback asks to. */
static bool report(struct pate_run *r, const char *phase)
{
	r->prog.phase = phase;
	if (r->progress && r->progress(&r->prog, r->user) != 0)
		r->stopped = true;
	return r->stopped;
}

/* The capped epochs stay at least 1 on any table a trainer reads. */
_Static_assert(DPG_MAX_TRAIN_EXAMPLES <= DPG_MAX_TRAINING_STEPS, "one epoch of lots of 1 fits");

uint32_t trn__pate_epochs(uint32_t epochs, uint64_t n, uint32_t lot)
{
	uint64_t most;

	if (n == 0 || lot == 0)
		return epochs;
	/* ceil(e n / L) <= limit exactly when e n <= limit L (limit whole). */
	most = (uint64_t)DPG_MAX_TRAINING_STEPS * lot / n;
	if (most >= epochs)
		return epochs;
	return most > 0 ? (uint32_t)most : 1;
}

/* The SGD parameters of a teacher or the student on n rows: the lot is
 * capped at n (Poisson sampling needs q = L / n <= 1) and the epochs at
 * the step limit (trn__pate_epochs). */
static void sgd_params(const trn_pate_model_params *m, size_t n, trn_dpsgd_params *ret)
{
	trn_dpsgd_params_default(ret);
	ret->model = m->model;
	ret->n_hidden = m->model == TRN_MODEL_MLP ? m->n_hidden : 0;
	memcpy(ret->hidden, m->hidden, sizeof(ret->hidden));
	ret->activation = m->activation;
	ret->lot_size = m->lot_size < n ? m->lot_size : (uint32_t)n;
	ret->epochs = trn__pate_epochs(m->epochs, n, ret->lot_size);
	ret->learning_rate = m->learning_rate;
	ret->learning_rate_final = m->learning_rate;
	ret->momentum = m->momentum;
}

/* Trains one model without privacy (a teacher on its private part, or the
 * student on released labels) and returns it; the run's cancel flag is
 * polled at every step, so a cancel stops a long training within a step.
 * TRN_CANCELLED (*ret untouched) when it did: a partly trained model is
 * never used. */
static int fit(const struct pate_run *r, const trn_pate_model_params *m, const trn_dataset *ds,
	       mech_rng *rng, trn_model **ret, acct_error *err)
{
	trn_dpsgd_params sp;
	trn_dpsgd_result *res = NULL;
	int rc;

	sgd_params(m, ds->n, &sp);
	rc = trn_sgd_nonprivate_run(&sp, ds, NULL, rng, NULL, NULL, r->cancel, &res, err);
	if (rc == 0) {
		*ret = res->model;
		res->model = NULL;
	}
	trn_dpsgd_result_free(res);
	return rc;
}

/* Rows `rows[0..n)` of `src` as a new table, labelled by src or by `y`. */
static int gather(const trn_dataset *src, const size_t *rows, size_t n, const uint32_t *y,
		  trn_dataset **ret, acct_error *err)
{
	trn_dataset *ds;
	int rc = trn_dataset_new(n, src->d, src->num_classes, &ds, err);

	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n; i++) {
		memcpy(ds->x + i * src->d, src->x + rows[i] * src->d, src->d * sizeof(double));
		ds->y[i] = y ? y[i] : src->y[rows[i]];
	}
	*ret = ds;
	return 0;
}

/* A teacher (rows[0..n)) trains with its own stream and adds its vote on
 * every query; TRN_CANCELLED, no vote, when a cancel stopped its training. */
static int teacher_vote(struct pate_run *r, const size_t *rows, size_t n, mech_rng *stream,
			acct_error *err)
{
	const trn_dataset *st = r->student;
	trn_dataset *part = NULL;
	trn_model *m = NULL;
	int rc;

	/* A teacher without rows abstains: a histogram may sum to less than n. */
	if (n == 0)
		return 0;
	if ((rc = gather(r->train, rows, n, NULL, &part, err)) < 0 ||
	    (rc = fit(r, &r->p->teacher, part, stream, &m, err)) != 0)
		goto out;
	for (size_t q = 0; q < r->p->queries; q++) {
		uint32_t cls;

		if ((rc = trn_model_predict(m, st->x + q * st->d, st->d, &cls, err)) < 0)
			goto out;
		r->votes[q * r->k + cls] += 1;
	}
out:
	trn_model_free(m);
	trn_dataset_free(part);
	return rc;
}

/* One stream per teacher, keyed from the run's before the partition
 * draws: a teacher's training randomness depends on nothing but its
 * index, so the teachers whose rows a neighbouring table leaves alone
 * train and vote exactly as before. */
static int teacher_streams(struct pate_run *r, mech_rng **streams, acct_error *err)
{
	for (size_t t = 0; t < r->p->teachers; t++) {
		streams[t] = mech_rng_new_stream(r->rng);
		if (!streams[t])
			return acct_error_set(err, ACCT_EINTERNAL, "", "the random number generator failed");
	}
	return 0;
}

/*
 * The teachers' streams, the partition (trn_pate_partition), then each
 * teacher in turn: the rows are grouped by teacher with a counting sort so
 * that every teacher reads its own part only.
 */
static int teachers_vote(struct pate_run *r, acct_error *err)
{
	size_t n = r->train->n, T = r->p->teachers;
	uint32_t *of = malloc(n * sizeof(*of));
	size_t *start = calloc(T + 1, sizeof(*start)), *rows = malloc(n * sizeof(*rows));
	mech_rng **streams = calloc(T, sizeof(*streams));
	int rc;

	if (!of || !start || !rows || !streams) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory for the teachers");
		goto out;
	}
	if ((rc = teacher_streams(r, streams, err)) < 0 ||
	    (rc = trn_pate_partition(r->rng, n, r->p->teachers, of, err)) < 0)
		goto out;
	for (size_t i = 0; i < n; i++)
		start[of[i] + 1]++;
	for (size_t t = 0; t < T; t++)
		start[t + 1] += start[t];
	for (size_t i = 0; i < n; i++)
		rows[start[of[i]]++] = i;
	/* start[t] now ends part t; part t begins where part t - 1 ends. */
	for (size_t t = 0; t < T && !cancelled(r); t++) {
		size_t b = t ? start[t - 1] : 0;

		if ((rc = teacher_vote(r, rows + b, start[t] - b, streams[t], err)) < 0)
			goto out;
		if (rc == TRN_CANCELLED)
			break;
		r->prog.teachers_trained = (uint32_t)(t + 1);
		if (report(r, "teachers"))
			break;
	}
	rc = 0;
out:
	for (size_t t = 0; streams && t < T; t++)
		mech_rng_free(streams[t]);
	free(streams);
	free(of);
	free(start);
	free(rows);
	return rc;
}

int trn__pate_votes(const trn_pate_params *p, const trn_dataset *train,
		    const trn_dataset *student, mech_rng *rng, double *votes, acct_error *err)
{
	struct pate_run r = {.p = p, .train = train, .student = student, .rng = rng,
			     .votes = votes, .k = train->num_classes};

	memset(votes, 0, (size_t)p->queries * r.k * sizeof(*votes));
	return teachers_vote(&r, err);
}

/* The student's class probabilities on query rows [lo, hi) into
 * probs (interactive: what the threshold compares the votes with); the
 * uniform distribution before the student has any label. */
static int student_probs(struct pate_run *r, const trn_model *m, size_t lo, size_t hi,
			 double *probs, acct_error *err)
{
	const trn_dataset *st = r->student;

	for (size_t q = lo; q < hi; q++) {
		int rc = 0;

		if (m)
			rc = trn_model_scores(m, st->x + q * st->d, st->d, probs + q * r->k, r->k, err);
		else
			for (uint32_t j = 0; j < r->k; j++)
				probs[q * r->k + j] = 1.0 / r->k;
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Queries [lo, hi) through the shared aggregator; each teacher answer's
 * histogram into the release accumulator. */
static int ask(struct pate_run *r, size_t lo, size_t hi, const double *probs,
	       mech_pate_release *acc, acct_error *err)
{
	trn_pate_result *res = r->res;
	double dd[DPG_MAX_PATE_ORDERS];

	for (size_t q = lo; q < hi && !cancelled(r); q++) {
		const double *v = r->votes + q * r->k;
		mech_pate_outcome o;
		int rc = mech_pate_run_query(r->rng, &r->cfg, v, probs ? probs + q * r->k : NULL, &o,
					     dd, err);

		if (rc < 0)
			return rc;
		res->queries_asked++;
		res->checks += o.checked;
		res->answers += o.teacher_answer;
		res->student_answers += o.source == MECH_PATE_SRC_STUDENT;
		res->abstained += o.label < 0;
		r->labels[q] = o.label;
		if (o.teacher_answer && (rc = mech_pate_release_add(acc, v, err)) < 0)
			return rc;
		r->prog.queries_asked = (uint32_t)res->queries_asked;
		r->prog.queries_answered = (uint32_t)(res->answers + res->student_answers);
		if (report(r, "queries"))
			break;
	}
	return 0;
}

/* The rows [0, hi) labelled so far (released labels only) as a table. */
static int labelled_rows(const struct pate_run *r, size_t hi, trn_dataset **ret, acct_error *err)
{
	size_t *rows = malloc((hi ? hi : 1) * sizeof(*rows)), n = 0;
	uint32_t *y = malloc((hi ? hi : 1) * sizeof(*y));
	int rc = 0;

	if (!rows || !y)
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	for (size_t q = 0; rc == 0 && q < hi; q++)
		if (r->labels[q] >= 0) {
			rows[n] = q;
			y[n++] = (uint32_t)r->labels[q];
		}
	*ret = NULL;
	if (rc == 0 && n > 0)
		rc = gather(r->student, rows, n, y, ret, err);
	free(rows);
	free(y);
	return rc;
}

/* Trains the student on the rows labelled among [0, hi); *ret NULL when
 * there is none or a cancel stopped it (TRN_CANCELLED). */
static int fit_student(const struct pate_run *r, size_t hi, trn_model **ret, acct_error *err)
{
	trn_dataset *ds = NULL;
	int rc = labelled_rows(r, hi, &ds, err);

	*ret = NULL;
	if (rc == 0 && ds)
		rc = fit(r, &r->p->student, ds, r->rng, ret, err);
	if (rc == 0)
		r->res->student_rows = ds ? ds->n : 0;
	trn_dataset_free(ds);
	return rc;
}

/*
 * Runs every query through the aggregator.  Interactive-GNMax (Algorithm
 * 2) compares the votes with the student's probabilities: the first half
 * of the queries with the uniform distribution (there is no student yet),
 * the second half with a student trained on the first half's labels.
 */
static int aggregate(struct pate_run *r, mech_pate_release *acc, acct_error *err)
{
	size_t Q = r->p->queries, half = Q / 2;
	double *probs = NULL;
	trn_model *interim = NULL;
	int rc;

	if (r->cfg.agg != MECH_PATE_INTERACTIVE)
		return ask(r, 0, Q, NULL, acc, err);
	probs = malloc(Q * r->k * sizeof(*probs));
	if (!probs)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	if ((rc = student_probs(r, NULL, 0, half, probs, err)) < 0 ||
	    (rc = ask(r, 0, half, probs, acc, err)) < 0 || cancelled(r))
		goto out;
	if ((rc = fit_student(r, half, &interim, err)) != 0 ||
	    (rc = student_probs(r, interim, half, Q, probs, err)) < 0)
		goto out;
	rc = ask(r, half, Q, probs, acc, err);
out:
	trn_model_free(interim);
	free(probs);
	return rc;
}

/* epsilon at delta of an RDP value at one order (CKS 2020, Prop. 12). */
static double epsilon_at(double order, double rdp, double delta)
{
	return acct_rdp_to_epsilon(&order, &rdp, 1, delta, NULL);
}

/* The GNSS release of the data-dependent RDP at release_order (Appendix
 * B.5, priced by Theorem 23) and the epsilons it gives. */
static int release(struct pate_run *r, const mech_pate_release *acc, acct_error *err)
{
	const trn_pate_params *p = r->p;
	trn_pate_result *res = r->res;
	mech_pate_release_figures fig;
	double rdp_release, noisy;
	int rc;

	if ((rc = acct_pate_gnss_rdp(p->release_beta + MECH_PATE_GNSS_BETA_SLACK, p->release_sigma,
				     p->release_order, &rdp_release, err)) < 0)
		return rc;
	mech_pate_release_figures_get(acc, res->checks, p->release_beta, &fig);
	if ((rc = mech_pate_release_draw(r->rng, &fig, p->release_sigma, &noisy, err)) < 0)
		return rc;
	/* From here on only the noisy value is used. */
	res->released = true;
	res->rdp_data_dependent = fmax(noisy, 0.0);
	res->epsilon_data_dependent =
		epsilon_at(p->release_order, res->rdp_data_dependent + rdp_release, p->delta);
	res->epsilon_data_independent = epsilon_at(p->release_order, fig.bound, p->delta);
	return 0;
}

/* Self-training (post-processing): the student labels the student rows the
 * teachers did not, keeps those whose predicted class has probability >=
 * confidence, and a new student trains on both. */
static int self_train(struct pate_run *r, trn_model **model, acct_error *err)
{
	const trn_dataset *st = r->student;
	size_t n = st->n;
	double *s = malloc(r->k * sizeof(*s));
	int64_t *saved = r->labels;
	int64_t *lab = malloc(n * sizeof(*lab));
	uint64_t added = 0;
	int rc = 0;

	if (!s || !lab) {
		rc = acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
		goto out;
	}
	for (size_t q = 0; q < n && rc == 0; q++) {
		lab[q] = q < r->p->queries ? saved[q] : -1;
		if (lab[q] >= 0)
			continue;
		rc = trn_model_scores(*model, st->x + q * st->d, st->d, s, r->k, err);
		if (rc == 0 && s[trn__argmax(s, r->k)] >= r->p->confidence) {
			lab[q] = trn__argmax(s, r->k);
			added++;
		}
	}
	if (rc < 0 || added == 0)
		goto out;
	trn_model_free(*model);
	*model = NULL;
	r->labels = lab;
	rc = fit_student(r, n, model, err);
	r->labels = saved;
	r->res->self_trained_rows = added;
out:
	free(s);
	free(lab);
	return rc;
}

/* The student and the public figures of the released labels. */
static int student_phase(struct pate_run *r, acct_error *err)
{
	trn_pate_result *res = r->res;
	size_t right = 0, known = 0;
	int rc;

	if (report(r, "student"))
		return 0;
	for (size_t q = 0; q < r->p->queries; q++)
		if (r->labels[q] >= 0 && r->student->y[q] != TRN_NO_CLASS) {
			known++;
			right += (uint32_t)r->labels[q] == r->student->y[q];
		}
	res->label_accuracy = known ? (double)right / (double)known : NAN;
	if ((rc = fit_student(r, r->p->queries, &res->model, err)) != 0)
		return rc;
	if (res->model && r->p->semi_supervised && (rc = self_train(r, &res->model, err)) != 0)
		return rc;
	if (res->model && r->test)
		rc = trn_model_evaluate(res->model, r->test, &res->test_accuracy, NULL, err);
	return rc;
}

/* The checks of the tables against the parameters. */
static int run_check(const struct pate_run *r, acct_error *err)
{
	const trn_dataset *tr = r->train, *st = r->student, *te = r->test;
	int rc;

	if (!tr || !st || !r->rng)
		return acct_error_set(err, ACCT_EINVAL, "/data", "no training or student table");
	if ((rc = trn_dataset_validate(tr, "/data", err)) < 0 ||
	    (rc = trn_pate_check_shape(r->p, tr->d, tr->num_classes, st->n, err)) < 0)
		return rc;
	if (st->d != tr->d || st->num_classes != tr->num_classes ||
	    (te && (te->d != tr->d || te->num_classes != tr->num_classes)))
		return acct_error_set(err, ACCT_EINVAL, "/params/student_data",
				      "the public tables do not match the private one");
	return 0;
}

static int run_alloc(struct pate_run *r, acct_error *err)
{
	size_t Q = r->p->queries;
	int rc = trn_pate_cfg(r->p, r->k, &r->cfg, err);

	if (rc < 0)
		return rc;
	r->votes = calloc(Q * r->k, sizeof(*r->votes));
	r->labels = malloc(Q * sizeof(*r->labels));
	r->res = calloc(1, sizeof(*r->res));
	if (!r->votes || !r->labels || !r->res)
		return acct_error_set(err, ACCT_ENOMEM, "", "out of memory");
	for (size_t q = 0; q < Q; q++)
		r->labels[q] = -1;
	r->res->epsilon_data_dependent = NAN;
	r->res->rdp_data_dependent = NAN;
	r->res->epsilon_data_independent = NAN;
	r->res->label_accuracy = NAN;
	r->res->test_accuracy = NAN;
	r->prog.teachers = r->p->teachers;
	r->prog.queries = r->p->queries;
	return 0;
}

int trn_pate_run(const trn_pate_params *p, const trn_dataset *train, const trn_dataset *student,
		 const trn_dataset *test, mech_rng *rng, trn_pate_progress_fn progress,
		 void *progress_user, const atomic_bool *cancel, trn_pate_result **ret,
		 acct_error *err)
{
	struct pate_run r = {.p = p, .train = train, .student = student, .test = test, .rng = rng,
			     .progress = progress, .user = progress_user, .cancel = cancel};
	mech_pate_release *acc = NULL;
	double t0 = trn__now_seconds();
	int rc = run_check(&r, err);

	if (rc < 0)
		return rc;
	r.k = train->num_classes;
	if ((rc = run_alloc(&r, err)) < 0 ||
	    (rc = mech_pate_release_new(&r.cfg, p->release_order, &acc, err)) < 0 ||
	    (rc = teachers_vote(&r, err)) < 0)
		goto out;
	if (!cancelled(&r) && (rc = aggregate(&r, acc, err)) < 0)
		goto out;
	/* The release runs once any query did: it is part of what was asked. */
	if (r.res->queries_asked > 0 && !cancelled(&r) && !report(&r, "release") &&
	    (rc = release(&r, acc, err)) < 0)
		goto out;
	if (!cancelled(&r) && r.res->released && (rc = student_phase(&r, err)) < 0)
		goto out;
	r.res->train_seconds = trn__now_seconds() - t0;
	rc = r.res->released && r.res->queries_asked == (int64_t)p->queries && !cancelled(&r) ?
		     0 : TRN_CANCELLED;
	if (rc == TRN_CANCELLED) {
		trn_model_free(r.res->model);
		r.res->model = NULL;
	}
	*ret = r.res;
	r.res = NULL;
out:
	mech_pate_release_free(acc);
	trn_pate_result_free(r.res);
	free(r.votes);
	free(r.labels);
	return rc;
}
