/* dns_ad.c — owns the AD check of dnssec = trust-ad: libunbound hands back an answer of its
 * own making, so the trusted resolver's verdict is asked separately: the same question sent
 * by us over UDP to the first nameserver with RD, AD and the EDNS0 DO bit set (RFC 6840 5.7),
 * and only the header of its reply read (ID, QR, the question echoed, RCODE, AD). No record
 * of that reply is parsed. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/xmalloc.h"
#include "dns/dns_private.h"

#define AD_PACKET_MAX 4096

struct dns_adq {
	int fd;
	struct event *ev;
	uint16_t id;
	uint8_t q[DNS_NAME_MAX + 2 + 4]; /* the question as sent: name, type, class */
	size_t qlen;
	void (*cb)(bool ad, void *arg);
	void *arg;
};

int dns_ad_server(const struct dns_opts *o, struct sockaddr_storage *ss, socklen_t *len_r)
{
	char addr[128] = "", port[8] = "53";
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

	if (o->nnameservers > 0) {
		char text[128], *at;

		if (dns_ns_addr(o->nameservers[0], text, sizeof(text)) < 0)
			return -1;
		if ((at = strchr(text, '@')) != NULL) {
			snprintf(port, sizeof(port), "%s", at + 1);
			*at = '\0';
		}
		snprintf(addr, sizeof(addr), "%s", text);
	} else if (o->resolv_conf != NULL && o->resolv_conf[0] != '\0') {
		FILE *f = fopen(o->resolv_conf, "r");
		char line[256];

		while (f != NULL && addr[0] == '\0' && fgets(line, sizeof(line), f) != NULL)
			if (sscanf(line, " nameserver %127s", addr) != 1)
				addr[0] = '\0';
		if (f != NULL)
			fclose(f);
	}
	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, addr, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)atoi(port));
		*len_r = sizeof(*s4);
		return 0;
	}
	if (inet_pton(AF_INET6, addr, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)atoi(port));
		*len_r = sizeof(*s6);
		return 0;
	}
	return -1;
}

static void adq_end(struct dns_adq *a, bool ad)
{
	void (*cb)(bool, void *) = a->cb;
	void *arg = a->arg;

	event_free(a->ev);
	if (a->fd >= 0)
		close(a->fd);
	free(a);
	cb(ad, arg);
}

static bool same_question(const uint8_t *p, size_t len, const struct dns_adq *a)
{
	if (len < 12 + a->qlen)
		return false;
	for (size_t i = 0; i < a->qlen; i++) {
		uint8_t x = p[12 + i], y = a->q[i];

		if (x >= 'A' && x <= 'Z')
			x = (uint8_t)(x + 32);
		if (x != y)
			return false;
	}
	return true;
}

static void adq_cb(evutil_socket_t fd, short what, void *arg)
{
	struct dns_adq *a = arg;
	uint8_t p[AD_PACKET_MAX];
	ssize_t n;

	if (what & EV_TIMEOUT) {
		adq_end(a, false); /* no verdict: not secure */
		return;
	}
	while ((n = recv(a->fd, p, sizeof(p), 0)) >= 0) {
		uint16_t id = (uint16_t)(p[0] << 8 | p[1]);
		unsigned rcode = n >= 4 ? p[3] & 0x0f : 99;

		if (n < 12 || id != a->id || !(p[2] & 0x80) || p[4] != 0 || p[5] != 1 ||
		    !same_question(p, (size_t)n, a))
			continue; /* not the reply to our question: wait for it */
		adq_end(a, (p[3] & 0x20) != 0 && (rcode == 0 || rcode == 3));
		return;
	}
	if (errno != EAGAIN && errno != EWOULDBLOCK)
		adq_end(a, false);
}

struct dns_adq *dns_ad_ask(struct event_base *base, const struct sockaddr *sa, socklen_t salen,
			   const char *name, uint16_t type, int64_t timeout_ms,
			   void (*cb)(bool ad, void *arg), void *arg)
{
	struct dns_adq *a = xcalloc(1, sizeof(*a));
	uint8_t pkt[12 + sizeof(a->q) + 11];
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
	size_t n = 0;

	/* the question: labels of name (lower case, checked by the caller), type, class IN */
	for (const char *l = name; *l != '\0';) {
		size_t len = strcspn(l, ".");

		a->q[n++] = (uint8_t)len;
		for (size_t i = 0; i < len; i++)
			a->q[n++] = (uint8_t)l[i];
		l += len + (l[len] == '.');
	}
	a->q[n++] = 0;
	a->q[n++] = (uint8_t)(type >> 8);
	a->q[n++] = (uint8_t)type;
	a->q[n++] = 0;
	a->q[n++] = 1;
	a->qlen = n;
	a->id = (uint16_t)random();
	a->cb = cb;
	a->arg = arg;
	memset(pkt, 0, 12);
	pkt[0] = (uint8_t)(a->id >> 8);
	pkt[1] = (uint8_t)a->id;
	pkt[2] = 0x01; /* RD */
	pkt[3] = 0x20; /* AD: the resolver says what it validated */
	pkt[5] = 1;    /* QDCOUNT */
	pkt[11] = 1;   /* ARCOUNT: the OPT record */
	memcpy(pkt + 12, a->q, n);
	static const uint8_t opt[11] = { 0, 0, 41, 0x10, 0, 0, 0, 0x80, 0, 0, 0 }; /* DO */
	memcpy(pkt + 12 + n, opt, sizeof(opt));
	a->fd = socket(sa->sa_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (a->fd < 0 || connect(a->fd, sa, salen) < 0 ||
	    send(a->fd, pkt, 12 + n + sizeof(opt), 0) < 0) {
		tv.tv_sec = 0; /* fails at once, from the loop */
		tv.tv_usec = 0;
	}
	a->ev = event_new(base, a->fd, a->fd >= 0 ? EV_READ | EV_PERSIST : 0, adq_cb, a);
	event_add(a->ev, &tv);
	return a;
}

void dns_ad_cancel(struct dns_adq **ap)
{
	struct dns_adq *a = *ap;

	if (a == NULL)
		return;
	*ap = NULL;
	event_free(a->ev);
	if (a->fd >= 0)
		close(a->fd);
	free(a);
}
