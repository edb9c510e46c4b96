/* log.c — owns the log target (syslog or stderr), levels and event ids. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/time.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

static struct {
	char ident[64];
	bool to_stderr;
	int facility;
	enum log_level level;
	bool opened;
} lg = { "heron", true, LOG_MAIL, LOG_LVL_INFO, false };

static const int lvl_prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
static const char *const lvl_name[] = { "err", "warn", "info", "debug" };

void log_init(const char *ident, bool to_stderr, int facility)
{
	snprintf(lg.ident, sizeof(lg.ident), "%s", ident);
	lg.to_stderr = to_stderr;
	lg.facility = facility;
	if (lg.opened)
		closelog();
	lg.opened = false;
	if (!to_stderr) {
		openlog(lg.ident, LOG_PID | LOG_NDELAY, facility);
		lg.opened = true;
	}
}

void log_set_level(enum log_level lvl)
{
	lg.level = lvl;
}

enum log_level log_get_level(void)
{
	return lg.level;
}

int log_level_parse(const char *name)
{
	for (size_t i = 0; i < sizeof(lvl_name) / sizeof(lvl_name[0]); i++)
		if (strcasecmp(name, lvl_name[i]) == 0)
			return (int)i;
	if (strcasecmp(name, "error") == 0)
		return LOG_LVL_ERR;
	if (strcasecmp(name, "warning") == 0)
		return LOG_LVL_WARN;
	return -1;
}

int log_facility_parse(const char *name)
{
	static const struct {
		const char *name;
		int fac;
	} facs[] = {
		{ "mail", LOG_MAIL },     { "daemon", LOG_DAEMON }, { "user", LOG_USER },
		{ "auth", LOG_AUTH },     { "local0", LOG_LOCAL0 }, { "local1", LOG_LOCAL1 },
		{ "local2", LOG_LOCAL2 }, { "local3", LOG_LOCAL3 }, { "local4", LOG_LOCAL4 },
		{ "local5", LOG_LOCAL5 }, { "local6", LOG_LOCAL6 }, { "local7", LOG_LOCAL7 },
	};
	for (size_t i = 0; i < sizeof(facs) / sizeof(facs[0]); i++)
		if (strcasecmp(name, facs[i].name) == 0)
			return facs[i].fac;
	return -1;
}

void log_reopen(void)
{
	log_init(lg.ident, lg.to_stderr, lg.facility);
}

uint64_t log_new_id(void)
{
	static uint64_t base, seq;

	if (base == 0) {
		if (getrandom(&base, sizeof(base), 0) != sizeof(base))
			base = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
		base |= 1;
	}
	/* An odd multiplier permutes the 64-bit space: ids never repeat within a process. */
	return base + ++seq * 0x9e3779b97f4a7c15ULL;
}

static void log_vemit(enum log_level lvl, int errnum, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));
static void log_vemit(enum log_level lvl, int errnum, const char *fmt, va_list ap)
{
	char msg[2048];
	int n;

	if (lvl > lg.level)
		return;
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	if (n < 0)
		return;
	if (errnum != 0 && (size_t)n < sizeof(msg))
		snprintf(msg + n, sizeof(msg) - (size_t)n, ": %s", strerror(errnum));
	/* One event, one line: control characters from peers never split a line. */
	for (char *p = msg; *p != '\0'; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	if (lg.to_stderr) {
		struct timeval tv;
		struct tm tm;
		char ts[32];

		gettimeofday(&tv, NULL);
		localtime_r(&tv.tv_sec, &tm);
		strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
		fprintf(stderr, "%s.%03ld %s[%ld] %s: %s\n", ts, (long)(tv.tv_usec / 1000),
			lg.ident, (long)getpid(), lvl_name[lvl], msg);
	} else {
		syslog(lg.facility | lvl_prio[lvl], "%s", msg);
	}
}

#define LOG_FN(name, lvl, use_errno)                                           \
	void name(const char *fmt, ...)                                        \
	{                                                                      \
		int saved = errno;                                             \
		va_list ap;                                                    \
		va_start(ap, fmt);                                             \
		log_vemit(lvl, use_errno ? saved : 0, fmt, ap);                \
		va_end(ap);                                                    \
		errno = saved;                                                 \
	}

LOG_FN(log_err, LOG_LVL_ERR, 0)
LOG_FN(log_warn, LOG_LVL_WARN, 1)
LOG_FN(log_warnx, LOG_LVL_WARN, 0)
LOG_FN(log_info, LOG_LVL_INFO, 0)
LOG_FN(log_debug, LOG_LVL_DEBUG, 0)

noreturn void fatal(const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	va_start(ap, fmt);
	log_vemit(LOG_LVL_ERR, saved, fmt, ap);
	va_end(ap);
	exit(1);
}

noreturn void fatalx(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vemit(LOG_LVL_ERR, 0, fmt, ap);
	va_end(ap);
	exit(1);
}
