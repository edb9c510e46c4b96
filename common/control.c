/* control.c — owns the control socket protocol's text forms (who lines, socket names) and
 * its client side: one request to each daemon worker's socket, answers read with a bound. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/control.h"
#include "common/str.h"
#include "common/xmalloc.h"

static void put_field(struct buf *out, const char *s)
{
	if (s == NULL || s[0] == '\0') {
		buf_putc(out, '-');
		return;
	}
	for (; *s != '\0'; s++)
		buf_putc(out, *s == '\t' || *s == '\r' || *s == '\n' ? '?' : *s);
}

void control_who_line(struct buf *out, const char *ident, unsigned worker, long pid,
		      const struct control_session *s)
{
	buf_printf(out, "%s\t%u\t%ld\t%016" PRIx64 "\t", ident, worker, pid, s->id);
	put_field(out, s->user);
	buf_putc(out, '\t');
	put_field(out, s->addr);
	buf_putc(out, '\t');
	put_field(out, s->service);
	buf_putc(out, '\t');
	put_field(out, s->state);
	buf_printf(out, "\t%" PRId64 "\t%" PRId64 "\t", s->since, s->idle_ms);
	put_field(out, s->detail);
	buf_putc(out, '\n');
}

int control_who_parse(char *line, struct control_who *w)
{
	char *f[11], *p = line, *end;
	size_t n = 0;
	uint64_t v;

	line[strcspn(line, "\r\n")] = '\0';
	while (n < 11) {
		f[n++] = p;
		if ((p = strchr(p, '\t')) == NULL)
			break;
		*p++ = '\0';
	}
	if (n != 11 || p != NULL)
		return -1;
	memset(w, 0, sizeof(*w));
	w->ident = f[0];
	if (str_to_u64(f[1], strlen(f[1]), UINT32_MAX, &v) < 0)
		return -1;
	w->worker = (unsigned)v;
	if (str_to_u64(f[2], strlen(f[2]), INT32_MAX, &v) < 0)
		return -1;
	w->pid = (long)v;
	errno = 0;
	w->id = strtoull(f[3], &end, 16);
	if (errno != 0 || *end != '\0' || end == f[3])
		return -1;
	w->user = strcmp(f[4], "-") == 0 ? NULL : f[4];
	w->addr = f[5];
	w->service = f[6];
	w->state = f[7];
	w->since = strtoll(f[8], &end, 10);
	if (*end != '\0')
		return -1;
	w->idle_ms = strtoll(f[9], &end, 10);
	if (*end != '\0')
		return -1;
	w->detail = strcmp(f[10], "-") == 0 ? NULL : f[10];
	return 0;
}

int control_path(const char *dir, const char *ident, unsigned worker, char *out, size_t size)
{
	struct sockaddr_un sun;
	int n = snprintf(out, size, "%s/%s.%u.sock", dir, ident, worker);

	return n < 0 || (size_t)n >= size || (size_t)n >= sizeof(sun.sun_path) ? -1 : 0;
}

/* "IDENT.N.sock": the daemon and worker of a socket name; false for other names. */
static bool parse_name(const char *name, char *ident, size_t isize, unsigned *worker_r)
{
	const char *dot = strchr(name, '.'), *dot2;
	uint64_t v;

	if (dot == NULL || dot == name || (size_t)(dot - name) >= isize ||
	    (dot2 = strchr(dot + 1, '.')) == NULL || strcmp(dot2, ".sock") != 0 ||
	    str_to_u64(dot + 1, (size_t)(dot2 - dot - 1), 4096, &v) < 0)
		return false;
	memcpy(ident, name, (size_t)(dot - name));
	ident[dot - name] = '\0';
	*worker_r = (unsigned)v;
	return true;
}

struct sock_name {
	char ident[64];
	unsigned worker;
	char path[256];
};

static int sock_name_cmp(const void *a, const void *b)
{
	const struct sock_name *x = a, *y = b;
	int c = strcmp(x->ident, y->ident);

	return c != 0 ? c : (x->worker > y->worker) - (x->worker < y->worker);
}

/* Waits for fd to be ready for events until deadline (monotonic ms): 1, 0 at the deadline. */
static int wait_fd(int fd, short events, int64_t deadline)
{
	struct pollfd p = { .fd = fd, .events = events };
	int64_t left;
	int rc;

	do {
		left = deadline - clock_mono_ms();
		if (left <= 0)
			return 0;
		rc = poll(&p, 1, (int)left);
	} while (rc == -1 && errno == EINTR);
	return rc > 0 ? 1 : rc;
}

/* One request on path: the answer in *ans, or the reason in err. */
static int request_one(const char *path, const char *line, int timeout_ms, struct buf *ans,
		       char *err, size_t esize)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int64_t deadline = clock_mono_ms() + timeout_ms;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	struct buf req;
	size_t off = 0;
	int rc = -1;

	if (fd == -1) {
		snprintf(err, esize, "socket: %s", strerror(errno));
		return -1;
	}
	str_lcpy(sun.sun_path, path, sizeof(sun.sun_path));
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1 && errno != EINPROGRESS) {
		int e = errno;

		snprintf(err, esize, "%s",
			 e == ECONNREFUSED || e == ENOENT ? "not running" : strerror(e));
		close(fd);
		errno = e; /* EACCES: the socket's permissions keep the caller out */
		return -1;
	}
	buf_init(&req, 256, CONTROL_REQUEST_MAX);
	buf_printf(&req, "%s\n", line);
	while (off < req.len) {
		ssize_t n;

		if (wait_fd(fd, POLLOUT, deadline) <= 0)
			goto timeout;
		n = send(fd, req.data + off, req.len - off, MSG_NOSIGNAL);
		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			snprintf(err, esize, "%s",
				 errno == ECONNREFUSED ? "not running" : strerror(errno));
			goto out;
		}
		off += n > 0 ? (size_t)n : 0;
	}
	for (;;) {
		char chunk[16384];
		ssize_t n;

		if (wait_fd(fd, POLLIN, deadline) <= 0)
			goto timeout;
		n = recv(fd, chunk, sizeof(chunk), 0);
		if (n == 0)
			break;
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n < 0) {
			snprintf(err, esize, "%s", strerror(errno));
			goto out;
		}
		if (buf_append(ans, chunk, (size_t)n) < 0) {
			snprintf(err, esize, "answer longer than %u bytes", CONTROL_ANSWER_MAX);
			goto out;
		}
	}
	rc = 0;
	goto out;
timeout:
	snprintf(err, esize, "no answer within %d ms", timeout_ms);
out:
	buf_release(&req);
	close(fd);
	return rc;
}

/* The sockets in dir of daemon ident (NULL: any), in name order: *v_r (free), how many, or
   -1 with errno when dir cannot be read. */
static ssize_t list_sockets(const char *dir, const char *ident, struct sock_name **v_r)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	struct sock_name *v = NULL;
	size_t n = 0, cap = 0;

	*v_r = NULL;
	if (d == NULL)
		return -1;
	while ((de = readdir(d)) != NULL) {
		struct sock_name s;

		if (!parse_name(de->d_name, s.ident, sizeof(s.ident), &s.worker) ||
		    (ident != NULL && strcmp(ident, s.ident) != 0) ||
		    control_path(dir, s.ident, s.worker, s.path, sizeof(s.path)) < 0)
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 8;
			v = xreallocarray(v, cap, sizeof(*v));
		}
		v[n++] = s;
	}
	closedir(d);
	if (n > 0)
		qsort(v, n, sizeof(*v), sock_name_cmp);
	*v_r = v;
	return (ssize_t)n;
}

int control_request_all(const char *dir, const char *ident, const char *line, int timeout_ms,
			control_reply_cb *cb, void *arg)
{
	struct sock_name *v;
	ssize_t n = list_sockets(dir, ident, &v);

	if (n < 0)
		return -1;
	for (ssize_t i = 0; i < n; i++) {
		struct buf ans;
		char err[256];

		buf_init(&ans, 4096, CONTROL_ANSWER_MAX);
		if (request_one(v[i].path, line, timeout_ms, &ans, err, sizeof(err)) == 0)
			cb(v[i].ident, v[i].worker, buf_cstr(&ans), ans.len, NULL, arg);
		else
			cb(v[i].ident, v[i].worker, NULL, 0, err, arg);
		buf_release(&ans);
	}
	free(v);
	return (int)n;
}

int control_request_first(const char *dir, const char *ident, const char *line, int timeout_ms,
			  struct buf *ans, char *err, size_t esize)
{
	struct sock_name *v;
	ssize_t n = list_sockets(dir, ident, &v);
	int e = ENOENT;

	if (n < 0) {
		e = errno;
		snprintf(err, esize, "%s: %s", dir, strerror(e));
		errno = e;
		return -1;
	}
	snprintf(err, esize, "not running (no %s socket in %s)", ident, dir);
	for (ssize_t i = 0; i < n; i++) {
		buf_reset(ans);
		errno = 0;
		if (request_one(v[i].path, line, timeout_ms, ans, err, esize) == 0) {
			free(v);
			return 0;
		}
		e = errno == EACCES || errno == EPERM ? errno : e;
	}
	free(v);
	buf_reset(ans);
	errno = e;
	return -1;
}
