/* log.h — one line per event, to syslog, stderr or a file.
 *
 * Convention (STYLE 16): a session or queue id first as %016" PRIx64 ", then key=value pairs,
 * never a secret. fatal/log_warn append strerror(errno); the x forms do not. */
#ifndef HERON_LOG_H
#define HERON_LOG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdnoreturn.h>

enum log_level {
	LOG_LVL_ERR = 0,
	LOG_LVL_WARN,
	LOG_LVL_INFO,
	LOG_LVL_DEBUG,
};

/* Starts logging as ident. to_stderr: write to stderr (foreground, -f); otherwise syslog with
   facility (a LOG_* facility value). Safe to call again (after SIGHUP, say). */
void log_init(const char *ident, bool to_stderr, int facility);
void log_set_level(enum log_level lvl);
enum log_level log_get_level(void);
/* Starts logging as ident to the file at path (appended, created 0640): lines as on stderr,
   one write(2) each, so processes sharing the file never interleave. -1 with *error_r
   (malloc'd; error_r may be NULL) when it cannot be opened; logging is then unchanged. */
int log_init_file(const char *ident, const char *path, char **error_r);
/* Reopens the log target (SIGHUP, SIGUSR1: after logrotate moved the file away). A file that
   cannot be opened again is warned about and the old descriptor kept. The ident stays. */
void log_reopen(void);
/* A new id for a session or queue entry: unique in this process, random across processes. */
uint64_t log_new_id(void);

void log_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
noreturn void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
noreturn void fatalx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
