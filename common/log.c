/* log.c — owns the log target (syslog, stderr or a file), levels and event ids. */
#include <errno.h>
#include <fcntl.h>
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
	char *file; /* log_init_file's path; NULL: syslog or stderr */
	int fd;     /* the file's descriptor, O_APPEND; -1 */
} lg = { "heron", true, LOG_MAIL, LOG_LVL_INFO, false, NULL, -1 };

static const int lvl_prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
static const char *const lvl_name[] = { "err", "warn", "info", "debug" };

static void set_ident(const char *ident)
{
	/* log_reopen passes lg.ident itself: copying a buffer onto itself is undefined */
	if (ident != lg.ident)
		snprintf(lg.ident, sizeof(lg.ident), "%s", ident);
}

static void file_close(void)
{
	if (lg.fd != -1)
		close(lg.fd);
	lg.fd = -1;
	free(lg.file);
	lg.file = NULL;
}

void log_init(const char *ident, bool to_stderr, int facility)
{
	set_ident(ident);
	file_close();
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

static int file_open(const char *path, char **error_r)
{
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0640);

	if (fd == -1 && error_r != NULL) {
		size_t n = strlen(path) + 64;

		if ((*error_r = malloc(n)) != NULL)
			snprintf(*error_r, n, "log file %s: %s", path, strerror(errno));
	}
	return fd;
}

int log_init_file(const char *ident, const char *path, char **error_r)
{
	int fd = file_open(path, error_r);
	char *copy;

	if (fd == -1)
		return -1;
	if ((copy = strdup(path)) == NULL) {
		close(fd);
		if (error_r != NULL)
			*error_r = strdup("out of memory");
		return -1;
	}
	set_ident(ident);
	file_close();
	if (lg.opened)
		closelog();
	lg.opened = false;
	lg.to_stderr = false;
	lg.file = copy;
	lg.fd = fd;
	return 0;
}

void log_reopen(void)
{
	int fd, saved = errno;

	if (lg.file == NULL) {
		log_init(lg.ident, lg.to_stderr, lg.facility);
		return;
	}
	/* The old descriptor stays when the file cannot be opened again: lines keep going to
	   the rotated file rather than nowhere. */
	if ((fd = file_open(lg.file, NULL)) == -1) {
		log_warn("log reopen %s", lg.file);
		errno = saved;
		return;
	}
	dup3(fd, lg.fd, O_CLOEXEC);
	close(fd);
	errno = saved;
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
	if (lg.to_stderr || lg.fd != -1) {
		struct timeval tv;
		struct tm tm;
		char ts[32], line[2200];
		int len;

		gettimeofday(&tv, NULL);
		localtime_r(&tv.tv_sec, &tm);
		strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
		len = snprintf(line, sizeof(line), "%s.%03ld %s[%ld] %s: %s\n", ts,
			       (long)(tv.tv_usec / 1000), lg.ident, (long)getpid(), lvl_name[lvl],
			       msg);
		if (len >= (int)sizeof(line)) {
			len = (int)sizeof(line) - 1;
			line[len - 1] = '\n';
		}
		/* One write per line: lines of the processes sharing a file never interleave. */
		if (len > 0 && write(lg.fd != -1 ? lg.fd : STDERR_FILENO, line, (size_t)len) < 0) {
			/* nowhere left to say it */
		}
	} else {
		syslog(lg.facility | lvl_prio[lvl], "%s", msg);
	}
}

#define LOG_FN(name, lvl, use_errno)                            \
	void name(const char *fmt, ...)                         \
	{                                                       \
		int saved = errno;                              \
		va_list ap;                                     \
		va_start(ap, fmt);                              \
		log_vemit(lvl, use_errno ? saved : 0, fmt, ap); \
		va_end(ap);                                     \
		errno = saved;                                  \
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
