/* notify.c — owns the service manager notification (sd_notify's protocol, written here:
 * one datagram to $NOTIFY_SOCKET; no library needed for it). */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/notify.h"

/* Fills sa from $NOTIFY_SOCKET; 0 when unset, -1 when unusable, else the address length. */
static socklen_t notify_addr(struct sockaddr_un *sa)
{
	const char *path = getenv("NOTIFY_SOCKET");
	size_t n;

	if (path == NULL || path[0] == '\0')
		return 0;
	n = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || n >= sizeof(sa->sun_path))
		return (socklen_t)-1;
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	memcpy(sa->sun_path, path, n);
	if (path[0] == '@')
		sa->sun_path[0] = '\0'; /* abstract: the length, not a NUL, ends the name */
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (path[0] == '/'));
}

int notify_send(const char *state, const char *fmt, ...)
{
	struct sockaddr_un sa;
	socklen_t len = notify_addr(&sa);
	char msg[1024];
	size_t n;
	int fd, rc, saved;

	if (len == 0)
		return 0;
	if (len == (socklen_t)-1) {
		errno = EINVAL;
		return -1;
	}
	n = (size_t)snprintf(msg, sizeof(msg), "%s\n", state);
	if (strstr(state, "RELOADING=1") != NULL && n < sizeof(msg)) {
		n += (size_t)snprintf(msg + n, sizeof(msg) - n, "MONOTONIC_USEC=%llu\n",
				      (unsigned long long)clock_mono_us());
	}
	if (fmt != NULL && n + 8 < sizeof(msg)) {
		va_list ap;

		n += (size_t)snprintf(msg + n, sizeof(msg) - n, "STATUS=");
		va_start(ap, fmt);
		vsnprintf(msg + n, sizeof(msg) - n, fmt, ap);
		va_end(ap);
		n = strlen(msg);
	}
	if (n >= sizeof(msg))
		n = sizeof(msg) - 1;
	if ((fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) == -1)
		return -1;
	rc = sendto(fd, msg, n, MSG_NOSIGNAL, (struct sockaddr *)&sa, len) == (ssize_t)n ? 0 : -1;
	saved = errno;
	close(fd);
	errno = saved;
	return rc;
}
