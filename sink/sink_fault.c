/* sink_fault.c — owns fault injection settings (shared by all workers, changed at start or by
 * the control port) and the per-process random draws that apply them. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/str.h"
#include "sink/sink.h"

#define PPM 1000000u

static const char *const fault_names[FAULT_NKEYS] = {
	[FAULT_MAIL_4XX] = "mail_4xx",
	[FAULT_MAIL_5XX] = "mail_5xx",
	[FAULT_RCPT_4XX] = "rcpt_4xx",
	[FAULT_RCPT_5XX] = "rcpt_5xx",
	[FAULT_DATA_4XX] = "data_4xx",
	[FAULT_DATA_5XX] = "data_5xx",
	[FAULT_DROP_IN_DATA] = "drop_in_data",
	[FAULT_DELAY_MS] = "delay_ms",
	[FAULT_GREETING_DELAY_MS] = "greeting_delay_ms",
};

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

const char *sink_fault_name(enum sink_fault_key k)
{
	return fault_names[k];
}

int sink_fault_lookup(const char *name, size_t len)
{
	for (int k = 0; k < FAULT_NKEYS; k++)
		if (str_caseeq(name, len, fault_names[k], strlen(fault_names[k])))
			return k;
	return -1;
}

int sink_fault_set(struct sink_faults *f, enum sink_fault_key k, double value)
{
	uint32_t v;

	if (k < FAULT_NSHARES) {
		if (!(value >= 0.0 && value <= 1.0))
			return -1;
		v = (uint32_t)lround(value * PPM);
	} else {
		if (!(value >= 0.0 && value <= SINK_FAULT_MS_MAX) || value != floor(value))
			return -1;
		v = (uint32_t)value;
	}
	atomic_store_explicit(&f->v[k], v, memory_order_relaxed);
	return 0;
}

uint32_t sink_fault_get(const struct sink_faults *f, enum sink_fault_key k)
{
	return atomic_load_explicit(&f->v[k], memory_order_relaxed);
}

void sink_faults_json(const struct sink_faults *f, struct buf *out)
{
	buf_putc(out, '{');
	for (int k = 0; k < FAULT_NKEYS; k++) {
		uint32_t v = sink_fault_get(f, (enum sink_fault_key)k);

		if (k < FAULT_NSHARES)
			buf_printf(out, "%s\"%s\":%.6g", k > 0 ? "," : "", fault_names[k],
				   (double)v / PPM);
		else
			buf_printf(out, ",\"%s\":%u", fault_names[k], v);
	}
	buf_putc(out, '}');
}

void sink_fault_seed(uint64_t seed)
{
	rng_state = seed != 0 ? seed : 0x9e3779b97f4a7c15ull;
}

/* xorshift64*: plenty for choosing which transactions fail. */
static uint32_t rng_ppm(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (uint32_t)(((rng_state * 0x2545f4914f6cdd1dull) >> 32) % PPM);
}

enum sink_verdict sink_fault_draw(const struct sink_faults *f, enum sink_fault_key k4,
				  enum sink_fault_key k5)
{
	uint32_t s4 = sink_fault_get(f, k4), s5 = sink_fault_get(f, k5), r;

	if (s4 == 0 && s5 == 0)
		return VERDICT_OK;
	r = rng_ppm();
	if (r < s4)
		return VERDICT_4XX;
	if (r < s4 + s5)
		return VERDICT_5XX;
	return VERDICT_OK;
}

bool sink_fault_hit(const struct sink_faults *f, enum sink_fault_key k)
{
	uint32_t s = sink_fault_get(f, k);

	return s != 0 && rng_ppm() < s;
}
