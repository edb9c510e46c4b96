/* control.h — the control socket protocol of Heron's daemons, both ends.
 *
 * Each worker of a daemon listens on the unix socket DIR/IDENT.WORKER.sock ([control] dir;
 * mode 0660, owned by the daemon's user: whoever may open it may use it, which is the
 * authentication). A client connects, sends one request line and reads the answer until the
 * server closes the connection:
 *   who          one line per session of the worker (control_who_line's form), then "."
 *   kick USER    closes USER's sessions in the worker; "OK N" (N sessions closed)
 *   metrics      the daemon's metrics (all workers), Prometheus text, then "# EOF"
 *   queue        mtad only: the outbound queue's undelivered entries, one line each
 *                "Q" TAB id(16 hex) TAB size TAB arrival(Unix time) TAB state TAB sender|<>
 *                (state "*" being delivered, "!" held, "-" waiting), then a line
 *                "R" TAB recipient TAB last reason|- per undelivered recipient; at the end
 *                "T" TAB entries-not-listed (an answer is bounded) and "."
 * An unknown or malformed request gets "ERR reason". Names are bytes without TAB, CR, LF.
 *
 * The client side (control_request_all) is blocking and bounded in time: for admin tools. */
#ifndef HERON_CONTROL_H
#define HERON_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

/* The longest request line (with its LF), and an answer a client reads at most. */
#define CONTROL_REQUEST_MAX 1024
#define CONTROL_ANSWER_MAX (64u << 20)

/* One session as `who` lists it. */
struct control_session {
	uint64_t id;         /* the session id of the daemon's log lines */
	const char *user;    /* NULL or "": not logged in */
	const char *addr;    /* the client's address ("127.0.0.1:40000") */
	const char *service; /* "imap", "imaps", "smtp", "submission", "lmtp", "sieve" */
	const char *state;   /* "notauth", "auth", "selected", "idle", "mail", "data"... */
	int64_t since;       /* Unix time of the connect */
	int64_t idle_ms;     /* since the last command */
	const char *detail;  /* the selected mailbox, the running command, or NULL */
};

/* Appends the who line of s in worker (of daemon ident, process pid):
   ident TAB worker TAB pid TAB id(16 hex) TAB user|- TAB addr TAB service TAB state TAB
   since TAB idle_ms TAB detail|- LF. Fields holding TAB, CR or LF have them as '?'. */
void control_who_line(struct buf *out, const char *ident, unsigned worker, long pid,
		      const struct control_session *s);

/* The who line parsed back: fields point into line (modified: NULs at the tabs). -1 when
   it is not one. */
struct control_who {
	const char *ident;
	unsigned worker;
	long pid;
	uint64_t id;
	const char *user, *addr, *service, *state, *detail; /* user/detail NULL for "-" */
	int64_t since, idle_ms;
};
int control_who_parse(char *line, struct control_who *w);

/* Socket names: the path of ident's worker in dir into out; -1 when too long for a unix
   socket. */
int control_path(const char *dir, const char *ident, unsigned worker, char *out, size_t size);

/* One answer of control_request_all: the socket's daemon and worker, and either the answer
   (answer[0..len), NUL-terminated, error NULL) or why there is none ("not running", a
   connect or read error, "no answer within 5 s"). */
typedef void control_reply_cb(const char *ident, unsigned worker, const char *answer, size_t len,
			      const char *error, void *arg);
/* Sends line (without LF) to every control socket in dir whose daemon is ident (NULL: every
   daemon's), in name order, waiting at most timeout_ms for each, and calls cb for each.
   Returns the number of sockets found, or -1 with errno when dir cannot be read. */
int control_request_all(const char *dir, const char *ident, const char *line, int timeout_ms,
			control_reply_cb *cb, void *arg);
/* Sends line to the sockets of ident in dir in name order until one answers (every worker
   of a daemon answers the same: the queue), the answer in ans (buf_init'd by the caller,
   bounded by CONTROL_ANSWER_MAX). 0, or -1 with the reason in err and errno EACCES/EPERM
   when a socket or dir refused the caller, ENOENT when none is running, else another. */
int control_request_first(const char *dir, const char *ident, const char *line, int timeout_ms,
			  struct buf *ans, char *err, size_t esize);

#endif
