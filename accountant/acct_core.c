/*
 * acct_core.c: error records, UTF-8 checks, and the event tree (allocation,
 * names, copies).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acct.h"

void acct_error_init(acct_error *err)
{
	if (!err)
		return;
	err->code = ACCT_OK;
	err->where[0] = '\0';
	err->text[0] = '\0';
}

int acct_error_set(acct_error *err, int code, const char *where, const char *fmt, ...)
{
	va_list ap;

	if (!err || err->code != ACCT_OK)
		return code;
	err->code = code;
	snprintf(err->where, sizeof(err->where), "%s", where ? where : "");
	va_start(ap, fmt);
	vsnprintf(err->text, sizeof(err->text), fmt, ap);
	va_end(ap);
	acct_utf8_scrub(err->where);
	acct_utf8_scrub(err->text);
	return code;
}

/* Length of the valid UTF-8 sequence starting at s (n > 0 bytes there), or
 * 0 when none starts there. */
static size_t utf8_sequence(const unsigned char *s, size_t n)
{
	uint32_t cp;
	size_t len;

	if (s[0] < 0x80)
		return 1;
	if (s[0] < 0xc2) /* a continuation byte, or the lead of an overlong pair */
		return 0;
	if (s[0] < 0xe0) {
		len = 2;
		cp = s[0] & 0x1fu;
	} else if (s[0] < 0xf0) {
		len = 3;
		cp = s[0] & 0x0fu;
	} else if (s[0] < 0xf5) {
		len = 4;
		cp = s[0] & 0x07u;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3fu);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

bool acct_utf8_valid(const char *s, size_t n, size_t *ret_bad)
{
	const unsigned char *u = (const unsigned char *)s;

	for (size_t i = 0; i < n;) {
		size_t len = utf8_sequence(u + i, n - i);

		if (len == 0) {
			if (ret_bad)
				*ret_bad = i;
			return false;
		}
		i += len;
	}
	return true;
}

void acct_utf8_scrub(char *s)
{
	unsigned char *u = (unsigned char *)s;
	size_t n = strlen(s);

	for (size_t i = 0; i < n;) {
		size_t len = utf8_sequence(u + i, n - i);

		if (len == 0) {
			u[i++] = '?';
			continue;
		}
		i += len;
	}
}

const char *acct_code_name(int code)
{
	switch (code) {
	case ACCT_OK: return "ok";
	case ACCT_EINVAL: return "invalid";
	case ACCT_EUNSUPPORTED: return "unsupported";
	case ACCT_ENUMERIC: return "numeric";
	case ACCT_ENOMEM: return "nomem";
	case ACCT_EEXCEEDED: return "exceeded";
	default: return "internal";
	}
}

static const char *const event_names[ACCT_EV__COUNT] = {
	[ACCT_EV_GAUSSIAN] = "gaussian",
	[ACCT_EV_LAPLACE] = "laplace",
	[ACCT_EV_DISCRETE_GAUSSIAN] = "discrete_gaussian",
	[ACCT_EV_DISCRETE_LAPLACE] = "discrete_laplace",
	[ACCT_EV_RANDOMIZED_RESPONSE] = "randomized_response",
	[ACCT_EV_EXPONENTIAL_MECHANISM] = "exponential_mechanism",
	[ACCT_EV_PERMUTE_AND_FLIP] = "permute_and_flip",
	[ACCT_EV_EPSILON_DELTA] = "epsilon_delta",
	[ACCT_EV_ZCDP] = "zcdp",
	[ACCT_EV_POISSON_SAMPLED] = "poisson_sampled",
	[ACCT_EV_SAMPLED_WITHOUT_REPLACEMENT] = "sampled_without_replacement",
	[ACCT_EV_SELF_COMPOSED] = "self_composed",
	[ACCT_EV_COMPOSED] = "composed",
	[ACCT_EV_GNMAX] = "gnmax",
	[ACCT_EV_PATE_THRESHOLD] = "pate_threshold",
	[ACCT_EV_PATE_GNSS] = "pate_gnss",
};

const char *acct_event_type_name(acct_event_type type)
{
	if ((unsigned)type >= ACCT_EV__COUNT)
		return NULL;
	return event_names[type];
}

int acct_event_type_from_name(const char *name, acct_event_type *ret_type)
{
	if (!name)
		return -1;
	for (unsigned i = 0; i < ACCT_EV__COUNT; i++) {
		if (strcmp(event_names[i], name) == 0) {
			*ret_type = (acct_event_type)i;
			return 0;
		}
	}
	return -1;
}

acct_event *acct_event_new(acct_event_type type)
{
	acct_event *ev = calloc(1, sizeof(*ev));

	if (ev)
		ev->type = type;
	return ev;
}

void acct_event_free(acct_event *ev)
{
	if (!ev)
		return;
	switch (ev->type) {
	case ACCT_EV_POISSON_SAMPLED:
		acct_event_free(ev->u.poisson_sampled.event);
		break;
	case ACCT_EV_SAMPLED_WITHOUT_REPLACEMENT:
		acct_event_free(ev->u.sampled_without_replacement.event);
		break;
	case ACCT_EV_SELF_COMPOSED:
		acct_event_free(ev->u.self_composed.event);
		break;
	case ACCT_EV_COMPOSED:
		for (size_t i = 0; i < ev->u.composed.n; i++)
			acct_event_free(ev->u.composed.events[i]);
		free(ev->u.composed.events);
		break;
	default:
		break;
	}
	free(ev);
}

/* The single child slot of a wrapper event, or NULL for other types. */
static acct_event **child_slot(acct_event *ev)
{
	switch (ev->type) {
	case ACCT_EV_POISSON_SAMPLED: return &ev->u.poisson_sampled.event;
	case ACCT_EV_SAMPLED_WITHOUT_REPLACEMENT: return &ev->u.sampled_without_replacement.event;
	case ACCT_EV_SELF_COMPOSED: return &ev->u.self_composed.event;
	default: return NULL;
	}
}

acct_event *acct_event_copy(const acct_event *ev)
{
	acct_event *copy = NULL;
	acct_event **slot;

	if (!ev)
		return NULL;
	copy = malloc(sizeof(*copy));
	if (!copy)
		return NULL;
	*copy = *ev;
	if (ev->type == ACCT_EV_COMPOSED) {
		size_t n = ev->u.composed.n;

		copy->u.composed.n = 0;
		copy->u.composed.events = n ? calloc(n, sizeof(acct_event *)) : NULL;
		if (n && !copy->u.composed.events)
			goto fail;
		for (size_t i = 0; i < n; i++) {
			copy->u.composed.events[i] = acct_event_copy(ev->u.composed.events[i]);
			if (!copy->u.composed.events[i])
				goto fail;
			copy->u.composed.n = i + 1;
		}
		return copy;
	}
	slot = child_slot(copy);
	if (slot && *slot) {
		*slot = acct_event_copy(*slot);
		if (!*slot)
			goto fail;
	}
	return copy;
fail:
	acct_event_free(copy);
	return NULL;
}

acct_event *acct_event_epsilon_delta(double epsilon, double delta)
{
	acct_event *ev = acct_event_new(ACCT_EV_EPSILON_DELTA);

	if (ev) {
		ev->u.epsilon_delta.epsilon = epsilon;
		ev->u.epsilon_delta.delta = delta;
	}
	return ev;
}

acct_event *acct_event_self_composed(int64_t count, acct_event *inner)
{
	acct_event *ev = acct_event_new(ACCT_EV_SELF_COMPOSED);

	if (!ev) {
		acct_event_free(inner);
		return NULL;
	}
	ev->u.self_composed.count = count;
	ev->u.self_composed.event = inner;
	return ev;
}

acct_event *acct_event_poisson_sampled(double q, acct_event *inner)
{
	acct_event *ev = acct_event_new(ACCT_EV_POISSON_SAMPLED);

	if (!ev) {
		acct_event_free(inner);
		return NULL;
	}
	ev->u.poisson_sampled.sampling_probability = q;
	ev->u.poisson_sampled.event = inner;
	return ev;
}
