/* notify.h — tells a service manager (systemd, Type=notify) how the daemon is doing, with the
 * documented notification protocol: one datagram of "KEY=VALUE\n" lines to the AF_UNIX socket
 * named by $NOTIFY_SOCKET (a leading '@' is Linux's abstract namespace). Without
 * $NOTIFY_SOCKET every call does nothing, so daemons call these unconditionally. */
#ifndef HERON_NOTIFY_H
#define HERON_NOTIFY_H

/* Sends state ("READY=1", "RELOADING=1", "STOPPING=1", optionally more lines) followed by a
   "STATUS=" line made from fmt (NULL: none). 0 when sent or when there is no manager to tell;
   -1 (errno set) when the socket is named but the datagram could not be sent. RELOADING=1
   gets the MONOTONIC_USEC line systemd asks for. */
int notify_send(const char *state, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
