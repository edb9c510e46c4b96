/* clock.h — the one clock helper: the monotonic clock for durations, deadlines and timeouts
 * (never goes back), the wall clock for times that leave the process (Date: headers, arrival
 * records, reports, ids). */
#ifndef HERON_CLOCK_H
#define HERON_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t clock_ns_(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline int64_t clock_mono_ns(void)
{
	return clock_ns_(CLOCK_MONOTONIC);
}

static inline int64_t clock_mono_us(void)
{
	return clock_ns_(CLOCK_MONOTONIC) / 1000;
}

static inline int64_t clock_mono_ms(void)
{
	return clock_ns_(CLOCK_MONOTONIC) / 1000000;
}

/* Seconds, fractional: benchmarks' elapsed times. */
static inline double clock_mono_seconds(void)
{
	return (double)clock_ns_(CLOCK_MONOTONIC) / 1e9;
}

static inline int64_t clock_wall_us(void)
{
	return clock_ns_(CLOCK_REALTIME) / 1000;
}

static inline int64_t clock_wall_ms(void)
{
	return clock_ns_(CLOCK_REALTIME) / 1000000;
}

static inline int64_t clock_wall_s(void)
{
	return clock_ns_(CLOCK_REALTIME) / 1000000000;
}

#endif
