/* ms_session.c — owns one ManageSieve (RFC 5804) connection: the greeting with the
 * capabilities, the command parser (atoms, quoted strings, literals {n+} and {n}, with line
 * and script limits checked before anything is kept), STARTTLS, AUTHENTICATE PLAIN through
 * ldapauth and SCRAM-SHA-256[-PLUS] (common/sasl_drive.h over ldapauth_scram's secret, bound
 * to the TLS session), and the script commands over the store's sieve DBI; every write goes
 * through the group commit and the reply is sent from its callback. */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "common/authguard.h"
#include "common/clock.h"
#include "common/conf.h"
#include "common/conf_keys.h"
#include "common/log.h"
#include "common/metrics_std.h"
#include "common/net.h"
#include "common/proxy.h"
#include "common/sasl.h"
#include "common/sasl_drive.h"
#include "common/str.h"
#include "common/tls.h"
#include "common/xmalloc.h"
#include "ldapauth/ldapauth.h"
#include "managesieve/managesieved.h"
#include "sieve/sieve.h"
#include "store/store.h"
#include "store/store_sieve.h"

static void read_cb(struct bufferevent *bev, void *arg);
static void event_cb(struct bufferevent *bev, short what, void *arg);
static void ms_free(struct ms_session *s);
static void hold_cb(evutil_socket_t fd, short what, void *arg);

static void out(struct ms_session *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out(struct ms_session *s, const char *fmt, ...)
{
	va_list ap;

	ms_metrics_response(s, fmt);
	va_start(ap, fmt);
	evbuffer_add_vprintf(bufferevent_get_output(s->bev), fmt, ap);
	va_end(ap);
}

/* a quoted string for replies: quotes and backslashes escaped, CR/LF dropped */
static void out_quoted(struct ms_session *s, const char *p, size_t len)
{
	struct evbuffer *o = bufferevent_get_output(s->bev);

	evbuffer_add(o, "\"", 1);
	for (size_t i = 0; i < len; i++) {
		if (p[i] == '\r' || p[i] == '\n')
			continue;
		if (p[i] == '"' || p[i] == '\\')
			evbuffer_add(o, "\\", 1);
		evbuffer_add(o, p + i, 1);
	}
	evbuffer_add(o, "\"", 1);
}

static void reply_no(struct ms_session *s, const char *code, const char *text)
{
	out(s, "NO%s%s%s ", code ? " (" : "", code ? code : "", code ? ")" : "");
	out_quoted(s, text, strlen(text));
	out(s, "\r\n");
}

/* SCRAM is offered where PLAIN is, when the directory gives secrets; -PLUS with TLS. */
static bool scram_offered(const struct ms_session *s, bool plus)
{
	return s->srv->auth != NULL && ldapauth_scram_capable(s->srv->auth) &&
	       (s->tls || s->srv->allow_plaintext) && (s->tls || !plus);
}

static void capabilities(struct ms_session *s)
{
	struct ms_server *srv = s->srv;

	out(s, "\"IMPLEMENTATION\" \"Heron\"\r\n");
	if (s->tls || srv->allow_plaintext)
		out(s, "\"SASL\" \"PLAIN%s%s%s\"\r\n",
		    scram_offered(s, false) ? " SCRAM-SHA-256" : "",
		    scram_offered(s, true) ? " SCRAM-SHA-256-PLUS" : "",
		    s->tls && proxy_fronts_enabled() && ms_proxy_from_front(s) ? " EXTERNAL" : "");
	else
		out(s, "\"SASL\" \"\"\r\n");
	out(s, "\"SIEVE\" \"%s\"\r\n", sieve_extensions());
	if (srv->tls_ctx != NULL && !s->tls && !s->proxied_in)
		out(s, "\"STARTTLS\"\r\n");
	out(s, "\"MAXREDIRECTS\" \"%" PRId64 "\"\r\n",
	    conf_values(srv->conf)->sieve.max_redirects);
	if (s->authed)
		out(s, "\"OWNER\" \"%s\"\r\n", s->user);
	out(s, "\"VERSION\" \"1.0\"\r\nOK \"Heron ManageSieve ready\"\r\n");
}

/* closing: free once the output (and a TLS filter's socket) has flushed */
static void flush_check(struct ms_session *s)
{
	struct bufferevent *under = bufferevent_get_underlying(s->bev);
	size_t pending = evbuffer_get_length(bufferevent_get_output(s->bev)) +
			 (under ? evbuffer_get_length(bufferevent_get_output(under)) : 0);
	struct timeval tick = { 0, 50000 };

	if (pending == 0)
		ms_free(s);
	else
		evtimer_add(s->timer, &tick);
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
	flush_check(arg);
}

static void closing(struct ms_session *s)
{
	s->closing = true;
	bufferevent_disable(s->bev, EV_READ);
	flush_check(s);
}

static void write_cb(struct bufferevent *bev, void *arg)
{
	struct ms_session *s = arg;

	if (s->closing)
		flush_check(s);
}

static void set_callbacks(struct ms_session *s)
{
	struct timeval tv = { s->srv->timeout_ms / 1000, (s->srv->timeout_ms % 1000) * 1000 };

	bufferevent_setcb(s->bev, read_cb, write_cb, event_cb, s);
	bufferevent_set_timeouts(s->bev, &tv, &tv);
	bufferevent_enable(s->bev, EV_READ | EV_WRITE);
}

void ms_session_new(struct ms_server *srv, int fd, const struct sockaddr *sa, socklen_t salen,
		    const char *addr, const char *host)
{
	static uint64_t next_id;
	struct ms_session *s = xcalloc(1, sizeof(*s));

	s->id = ((uint64_t)getpid() << 32) | ++next_id;
	s->srv = srv;
	s->connected = (int64_t)time(NULL);
	s->connected_us = clock_mono_us();
	metrics_inc(MS_CONN_ACCEPTED, 0, 0);
	str_lcpy(s->addr, addr, sizeof(s->addr));
	str_lcpy(s->host, host, sizeof(s->host));
	if (salen <= sizeof(s->sa))
		memcpy(&s->sa, sa, salen);
	buf_init(&s->cmd, 256, (size_t)srv->lim.max_script_size + MS_LINE_MAX);
	s->bev = bufferevent_socket_new(srv->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (s->bev == NULL)
		fatalx("bufferevent_socket_new failed");
	s->timer = evtimer_new(srv->base, timer_cb, s);
	s->hold = evtimer_new(srv->base, hold_cb, s);
	TAILQ_INSERT_TAIL(&srv->sessions, s, entry);
	srv->nsessions++;
	set_callbacks(s);
	log_info("%016" PRIx64 " managesieve connect addr=%s", s->id, s->addr);
	capabilities(s);
}

/* Ends a SCRAM exchange; one given up before its outcome is "temporary" to the throttle. */
static void scram_end(struct ms_session *s)
{
	if (s->scram_charged)
		authguard_temp(s->srv->guard, s->host, s->auth_user);
	s->scram_charged = false;
	sasl_drive_free(&s->scram);
}

static void ms_free(struct ms_session *s)
{
	struct ms_server *srv = s->srv;

	if (s->busy) { /* an answer from the directory or the store is on its way */
		s->dead = true;
		bufferevent_disable(s->bev, EV_READ | EV_WRITE);
		return;
	}
	ldapauth_cancel(&s->req);
	event_free(s->timer);
	event_free(s->hold);
	if (s->plain != NULL) {
		sasl_plain_wipe(s->plain);
		free(s->plain);
	}
	scram_end(s);
	ms_proxy_free(s);
	free(s->mailhost);
	free(s->address);
	free(s->sasl_final);
	TAILQ_REMOVE(&srv->sessions, s, entry);
	srv->nsessions--;
	bufferevent_free(s->bev);
	buf_release(&s->cmd);
	log_info("%016" PRIx64 " managesieve close user=%s", s->id, s->user[0] ? s->user : "-");
	free(s);
	net_server_conn_done(srv->ns);
	if (srv->draining && srv->nsessions == 0)
		event_base_loopexit(srv->base, NULL);
}

/* an asynchronous step ended: false when the session went away meanwhile (it is freed) or
   ends now (kicked, or the worker drains: its answer is out, then the BYE) */
static bool resume(struct ms_session *s)
{
	s->busy = false;
	if (s->dead) {
		s->dead = false;
		ms_free(s);
		return false;
	}
	if (s->kicked) {
		ms_session_kick(s);
		return false;
	}
	if (s->srv->draining) {
		ms_session_drain(s);
		return false;
	}
	bufferevent_enable(s->bev, EV_READ);
	read_cb(s->bev, s);
	return true;
}

static void event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct ms_session *s = arg;

	if ((what & BEV_EVENT_CONNECTED) && !(what & (BEV_EVENT_ERROR | BEV_EVENT_EOF))) {
		metrics_tls_handshake(bev);
		return; /* the TLS handshake completed */
	}
	if ((what & BEV_EVENT_ERROR) && s->tls) {
		const char *proto = NULL;

		tls_peer_info(bev, &proto, NULL, NULL);
		if (proto == NULL)
			metrics_tls_failed();
	}
	if (what & BEV_EVENT_TIMEOUT)
		out(s, "BYE \"Idle timeout\"\r\n");
	ms_free(s);
}

void ms_session_close(struct ms_session *s)
{
	closing(s);
}

void ms_session_free(struct ms_session *s)
{
	ms_free(s);
}

void ms_session_kick(struct ms_session *s)
{
	if (ms_proxy_relaying(s)) { /* a BYE cannot be put between the store host's bytes */
		log_info("%016" PRIx64 " managesieve close user=%s reason=kicked", s->id, s->user);
		closing(s);
		return;
	}
	if (!s->busy) {
		log_info("%016" PRIx64 " managesieve close user=%s reason=kicked", s->id, s->user);
		out(s, "BYE \"Disconnected by the administrator\"\r\n");
		closing(s);
	}
}

void ms_session_drain(struct ms_session *s)
{
	if (ms_proxy_relaying(s)) {
		closing(s);
		return;
	}
	if (!s->busy) {
		out(s, "BYE \"Server shutting down\"\r\n");
		closing(s);
	}
}

/* ---- the parser --------------------------------------------------------------------------- */

enum { P_ERR = -1, P_MORE = 0, P_DONE = 1 };

/* one argument at *pos of p[0..n) into s->cmd; P_DONE, P_MORE (*need_r set), P_ERR */
static int parse_arg(struct ms_session *s, const char *p, size_t n, size_t *pos, size_t *need_r,
		     const char **err_r)
{
	size_t i = *pos;
	struct ms_arg *a = &s->arg[s->narg];
	size_t start = s->cmd.len;

	if (p[i] == '"') {
		for (i++; i < n; i++) {
			if (p[i] == '\\' && i + 1 < n) {
				buf_putc(&s->cmd, p[++i]);
				continue;
			}
			if (p[i] == '"')
				break;
			if (p[i] == '\r' || p[i] == '\n') {
				*err_r = "line end inside a quoted string";
				return P_ERR;
			}
			buf_putc(&s->cmd, p[i]);
		}
		if (i >= n) {
			*need_r = n + 1;
			return P_MORE;
		}
		i++;
	} else if (p[i] == '{') {
		uint64_t len = 0;
		size_t j = i + 1;

		while (j < n && isdigit((unsigned char)p[j]) && len < UINT32_MAX)
			len = len * 10 + (uint64_t)(p[j++] - '0');
		if (j < n && p[j] == '+')
			j++;
		if (j + 2 >= n + 1 && j + 2 > n) {
			*need_r = j + 3;
			return j - i > 22 ? (*err_r = "bad literal", P_ERR) : P_MORE;
		}
		if (p[j] != '}' || (p[j + 1] != '\r' && p[j + 1] != '\n')) {
			*err_r = "bad literal";
			return P_ERR;
		}
		j += p[j + 1] == '\r' ? 3 : 2;
		if (j > n) {
			*need_r = j;
			return P_MORE;
		}
		if (len > s->srv->lim.max_script_size) {
			/* drop what the client sends anyway; the answer is NO (QUOTA/MAXSIZE) */
			s->discard_left = len;
			*pos = j;
			*err_r = "script too large";
			return P_ERR;
		}
		if (n - j < len) {
			*need_r = j + (size_t)len;
			s->pending_lit = (size_t)len;
			return P_MORE;
		}
		buf_append(&s->cmd, p + j, (size_t)len);
		s->lit_bytes += (size_t)len;
		i = j + (size_t)len;
	} else {
		while (i < n && p[i] != ' ' && p[i] != '\r' && p[i] != '\n') {
			if ((unsigned char)p[i] < ' ' || p[i] == '"' || p[i] == '{') {
				*err_r = "bad character in a command";
				return P_ERR;
			}
			buf_putc(&s->cmd, p[i++]);
		}
		if (i >= n) {
			*need_r = n + 1;
			return P_MORE;
		}
		a->atom = true;
	}
	buf_putc(&s->cmd, '\0');
	a->len = s->cmd.len - start - 1;
	a->p = (const char *)(uintptr_t)start; /* an offset until the command is complete */
	s->narg++;
	*pos = i;
	return P_DONE;
}

/* the next command from in: P_DONE with s->arg filled (the bytes drained), P_MORE, P_ERR */
static int parse_cmd(struct ms_session *s, struct evbuffer *in, const char **err_r)
{
	size_t n = evbuffer_get_length(in), pos = 0, need = 0;
	const char *p;
	int rc;

	if (n == 0 || n < s->need)
		return P_MORE;
	p = (const char *)evbuffer_pullup(in, -1);
	buf_reset(&s->cmd);
	s->narg = 0;
	s->lit_bytes = 0;
	s->pending_lit = 0;
	for (;;) {
		while (pos < n && p[pos] == ' ')
			pos++;
		if (pos >= n) {
			need = n + 1;
			break;
		}
		if (p[pos] == '\r' || p[pos] == '\n') {
			if (p[pos] == '\r' && pos + 1 >= n) {
				need = n + 1;
				break;
			}
			pos += p[pos] == '\r' ? (p[pos + 1] == '\n' ? 2 : 1) : 1;
			if (pos - s->lit_bytes > MS_LINE_MAX + 2) {
				*err_r = "line too long";
				evbuffer_drain(in, pos);
				s->need = 0;
				return P_ERR;
			}
			evbuffer_drain(in, pos);
			s->need = 0;
			for (int k = 0; k < s->narg; k++)
				s->arg[k].p = s->cmd.data + (uintptr_t)s->arg[k].p;
			return s->narg == 0 ? P_MORE : P_DONE;
		}
		if (s->narg == MS_MAX_ARGS) {
			*err_r = "too many arguments";
			goto fail;
		}
		rc = parse_arg(s, p, n, &pos, &need, err_r);
		if (rc == P_ERR)
			goto fail;
		if (rc == P_MORE)
			break;
	}
	/* incomplete: the part outside literals must stay short */
	/* the bytes outside literals (up to an awaited literal) */
	if ((s->pending_lit ? need - s->pending_lit : n) - s->lit_bytes > MS_LINE_MAX) {
		*err_r = "line too long";
		goto fail;
	}
	s->need = need;
	return P_MORE;
fail:
	/* drop the bad line (and a refused literal, see discard) */
	{
		const char *eol = memchr(p + pos, '\n', n - pos);
		size_t drop = s->discard_left ? pos : eol ? (size_t)(eol - p) + 1 : n;

		if (!s->discard_left && eol == NULL)
			s->discard_line = true; /* the rest of the line is still coming */
		evbuffer_drain(in, drop);
	}
	s->need = 0;
	return P_ERR;
}

/* ---- commands --------------------------------------------------------------------------- */

static bool name_ok(const struct ms_arg *a)
{
	if (a->len == 0 || a->len > STORE_SIEVE_NAME_MAX)
		return false;
	for (size_t i = 0; i < a->len; i++)
		if ((unsigned char)a->p[i] < 0x20 || a->p[i] == 0x7f || a->p[i] == '/')
			return false;
	return true;
}

/* an authentication step ended; nested: it ran from the session's own input loop, which
   reads on by itself (resume would enter it again) */
static void auth_step_done(struct ms_session *s, bool nested)
{
	if (!nested) {
		resume(s);
		return;
	}
	s->busy = false;
	bufferevent_enable(s->bev, EV_READ);
}

/* the answer to a failed check, after the throttle's hold */
static void auth_fail_reply(struct ms_session *s, bool nested)
{
	reply_no(s, NULL, "Authentication failed");
	if (s->auth_failures >= 3) {
		out(s, "BYE \"Too many failures\"\r\n");
		s->busy = false;
		closing(s);
		return;
	}
	auth_step_done(s, nested);
}

/* What the session keeps of the directory's user until the outcome (the reply's strings go
   away). */
static void take_user(struct ms_session *s, const struct ldapauth_user *u)
{
	free(s->mailhost);
	free(s->address);
	s->mailhost = u->mailhost != NULL && u->mailhost[0] != '\0' ? xstrdup(u->mailhost) : NULL;
	s->address = u->address != NULL ? xstrdup(u->address) : NULL;
}

/* The user is homed on another store host (the directory's mailHost): true when the
   AUTHENTICATE was answered (a referral) or goes on at that host (the proxy login). */
static bool auth_elsewhere(struct ms_session *s, const char *sasl_final, bool nested)
{
	struct ms_server *srv = s->srv;
	const char *h = s->mailhost;

	if (h == NULL || strcasecmp(h, srv->hostname) == 0 || !proxy_host_ok(h))
		return false;
	if (!conf_values(srv->conf)->sieve.proxy || s->proxied_in) {
		/* RFC 5804 1.3: the client may go there itself */
		log_info("%016" PRIx64 " managesieve refer user=%s host=%s", s->id, s->user, h);
		s->user[0] = '\0';
		out(s, "NO (REFERRAL \"sieve://%s\") \"Your scripts are on %s\"\r\n", h, h);
		auth_step_done(s, nested);
		return true;
	}
	if (sasl_final != NULL)
		s->sasl_final = xstrdup(sasl_final);
	ms_proxy_start(s, s->address, h); /* the session stays busy until ms_session_proxied */
	return true;
}

/* The user moved away from this store (a tombstone, store_tomb.c) and the directory (a
   stale replica or cache) still homes it here: true when AUTHENTICATE was answered, with a
   referral to the new host when this server refers, else TRYLATER (a front's next lookup
   finds the new host). No account is made here with a first script. */
static bool auth_moved(struct ms_session *s, bool nested)
{
	struct store_tomb tb;

	if (store_tomb_find(s->srv->store, s->user, &tb) != 0)
		return false;
	if (!conf_values(s->srv->conf)->sieve.proxy || s->proxied_in) {
		log_info("%016" PRIx64 " managesieve refer user=%s host=%s reason=moved", s->id,
			 s->user, tb.host);
		out(s, "NO (REFERRAL \"sieve://%s\") \"Your scripts are on %s\"\r\n", tb.host,
		    tb.host);
	} else {
		log_info("%016" PRIx64 " managesieve login user=%s result=tempfail reason=\"moved "
			 "to %s\"",
			 s->id, s->user, tb.host);
		reply_no(s, "TRYLATER", "Your scripts have moved; try again later");
	}
	s->user[0] = '\0';
	auth_step_done(s, nested);
	return true;
}

void ms_session_proxied(struct ms_session *s, const char *why)
{
	if (s->dead) {
		resume(s);
		return;
	}
	if (why != NULL) {
		ms_proxy_free(s);
		s->user[0] = '\0';
		reply_no(s, "TRYLATER", "Your scripts are not reachable now; try again later");
		resume(s);
		return;
	}
	s->authed = true;
	if (s->sasl_final != NULL)
		out(s, "OK (SASL \"%s\") \"Logged in\"\r\n", s->sasl_final);
	else
		out(s, "OK \"Logged in\"\r\n");
	s->busy = false;
	ms_proxy_relay(s);
	if (s->kicked) /* mailctl kick while the store host was asked */
		ms_session_kick(s);
	else if (s->srv->draining) /* SIGTERM meanwhile: closed, as relayed sessions are */
		ms_session_drain(s);
}

/* A check's outcome (PLAIN's through ldapauth or SCRAM's): the throttle, the log, the reply
   (with SCRAM's server-final as "OK (SASL ...)"). The session is busy (input paused); nested:
   called from its own input loop, which goes on by itself. */
static void auth_outcome(struct ms_session *s, enum ldapauth_result result, const char *reason,
			 const char *login, int partition, const char *sasl_final, bool nested)
{
	struct authguard *g = s->srv->guard;
	int64_t hold;

	ldapauth_metrics_login(result);
	if (s->proxied_in) /* a front's credential: the front throttled the user's password */
		g = NULL;
	if (g != NULL && result == LDAPAUTH_OK)
		authguard_ok(g, s->host, s->auth_user);
	else if (g != NULL && result == LDAPAUTH_ETEMP)
		authguard_temp(g, s->host, s->auth_user);
	if (s->dead) {
		if (g != NULL && result != LDAPAUTH_OK && result != LDAPAUTH_ETEMP)
			(void)authguard_failed(g, s->host, s->auth_user);
		resume(s);
		return;
	}
	if (result == LDAPAUTH_OK) {
		str_lcpy(s->user, login, sizeof(s->user));
		if (auth_elsewhere(s, sasl_final, nested))
			return;
		/* a user the store does not know yet gets an account with the first script */
		if (store_user_locate(s->srv->store, s->user, &s->part) == STORE_ENOUSER) {
			if (auth_moved(s, nested))
				return;
			s->part = partition >= 0
					  ? (unsigned)partition % store_partitions(s->srv->store)
					  : store_partition_for(s->srv->store, s->user);
		}
		s->authed = true;
		log_info("%016" PRIx64 " managesieve login user=%s result=ok%s%s", s->id, s->user,
			 sasl_final != NULL ? " mech=scram" : "",
			 s->proxied_in ? " via=proxy" : "");
		if (sasl_final != NULL)
			out(s, "OK (SASL \"%s\") \"Logged in\"\r\n", sasl_final);
		else
			out(s, "OK \"Logged in\"\r\n");
	} else if (result == LDAPAUTH_ETEMP) {
		log_info("%016" PRIx64 " managesieve login result=tempfail reason=\"%s\"", s->id,
			 reason ? reason : "");
		reply_no(s, "TRYLATER", "Directory unavailable, try again later");
		s->proxied_in = false;
	} else {
		s->auth_failures++;
		log_info("%016" PRIx64 " managesieve login user=%s result=fail%s reason=\"%s\"",
			 s->id, s->auth_user, s->proxied_in ? " via=proxy" : "",
			 reason ? reason : "bad credentials");
		s->proxied_in = false;
		hold = g != NULL ? authguard_failed(g, s->host, s->auth_user) : 0;
		if (hold > 0) { /* the NO waits until the next check of the pair could start */
			struct timeval tv = { hold / 1000, (hold % 1000) * 1000 };

			s->hold_kind = HOLD_FAIL;
			evtimer_add(s->hold, &tv);
			return;
		}
		auth_fail_reply(s, nested);
		return;
	}
	auth_step_done(s, nested);
}

static void auth_done(const struct ldapauth_reply *r, void *arg)
{
	struct ms_session *s = arg;

	s->req = NULL;
	if (r->result == LDAPAUTH_OK)
		take_user(s, r->user);
	auth_outcome(s, r->result, r->reason, r->result == LDAPAUTH_OK ? r->user->login : NULL,
		     r->result == LDAPAUTH_OK ? r->user->partition : -1, NULL, false);
}

/* ---- SCRAM-SHA-256[-PLUS] ---- */

static void scram_step(struct ms_session *s, const struct sasl_step *st, bool nested);

/* The secret (or its absence) is known: server-first goes out as a challenge. */
static void scram_secret_done(const struct ldapauth_reply *r, void *arg)
{
	struct ms_session *s = arg;
	struct sasl_step st;

	s->req = NULL;
	if (s->dead || r->result == LDAPAUTH_ETEMP) {
		s->scram_charged = false; /* auth_outcome tells the throttle "temporary" */
		scram_end(s);
		auth_outcome(s, LDAPAUTH_ETEMP, r->reason, NULL, -1, NULL, false);
		return;
	}
	if (r->result == LDAPAUTH_OK) {
		take_user(s, r->user);
		str_lcpy(s->scram_login, r->user->login, sizeof(s->scram_login));
		s->scram_partition = r->user->partition;
	}
	sasl_drive_secret(s->scram, r->result == LDAPAUTH_OK, r->scram, r->reason, &st);
	scram_step(s, &st, false);
}

/* client-first was taken: the throttle begins with its user, then the secret is fetched. */
static void scram_begin(struct ms_session *s)
{
	struct authguard_check chk;

	str_lcpy(s->auth_user, sasl_drive_user(s->scram), sizeof(s->auth_user));
	authguard_begin(s->srv->guard, s->id, "sieve", s->host, s->auth_user, &chk);
	if (chk.refused) {
		metrics_inc(MS_LOGINS, MS_LOGIN_THROTTLED, 0);
		scram_end(s);
		reply_no(s, "TRYLATER", "Too many failed logins, try again later");
		return;
	}
	s->scram_charged = true;
	s->busy = true;
	bufferevent_disable(s->bev, EV_READ);
	if (chk.wait_ms > 0) { /* the throttle spaces this check */
		struct timeval tv = { chk.wait_ms / 1000, (chk.wait_ms % 1000) * 1000 };

		s->hold_kind = HOLD_START;
		evtimer_add(s->hold, &tv);
		return;
	}
	s->req = ldapauth_scram(s->srv->auth, s->auth_user, scram_secret_done, s);
}

/* What the driver said to do next. nested: called from the session's input loop, not from
   the directory's callback (which resumes the session itself). */
static void scram_step(struct ms_session *s, const struct sasl_step *st, bool nested)
{
	bool ok = st->act == SASL_DO_OK;

	switch (st->act) {
	case SASL_DO_SEND:
		s->auth_cont = true;
		out(s, "\"%s\"\r\n", st->out);
		if (!nested)
			resume(s);
		return;
	case SASL_DO_SECRET:
		scram_begin(s);
		return;
	case SASL_DO_CANCEL:
		scram_end(s);
		reply_no(s, NULL, "Authentication cancelled");
		return;
	case SASL_DO_OK:
	case SASL_DO_FAIL:
		break;
	}
	if (!ok && st->fail != SASL_FAIL_CRED) { /* client-first refused: nothing checked */
		if (st->fail != SASL_FAIL_AUTHZ)
			log_info("%016" PRIx64 " managesieve login mech=scram result=fail "
				 "reason=\"%s\"",
				 s->id, st->reason);
		scram_end(s);
		reply_no(s, NULL,
			 st->fail == SASL_FAIL_AUTHZ ? "Cannot act as another user"
						     : "Authentication failed");
		return;
	}
	s->scram_charged = false; /* its outcome is said now */
	scram_end(s);
	s->busy = true;
	bufferevent_disable(s->bev, EV_READ);
	auth_outcome(s, ok ? LDAPAUTH_OK : LDAPAUTH_EBADCRED, st->reason, s->scram_login,
		     s->scram_partition, ok ? st->out : NULL, nested);
}

static void auth_start(struct ms_session *s)
{
	struct sasl_plain *sp = s->plain;

	if (s->scram != NULL) {
		s->req = ldapauth_scram(s->srv->auth, s->auth_user, scram_secret_done, s);
		return;
	}
	s->plain = NULL;
	s->req = ldapauth_auth(s->srv->auth, sp->authcid, sp->passwd, auth_done, s);
	sasl_plain_wipe(sp);
	free(sp);
}

static void hold_cb(evutil_socket_t fd, short what, void *arg)
{
	struct ms_session *s = arg;

	if (s->hold_kind == HOLD_FAIL)
		auth_fail_reply(s, false);
	else
		auth_start(s);
}

static void proxy_lookup_done(const struct ldapauth_reply *r, void *arg)
{
	struct ms_session *s = arg;

	s->req = NULL;
	if (r->result == LDAPAUTH_OK)
		take_user(s, r->user);
	auth_outcome(s, r->result == LDAPAUTH_ENOUSER ? LDAPAUTH_EBADCRED : r->result, r->reason,
		     r->result == LDAPAUTH_OK ? r->user->login : NULL,
		     r->result == LDAPAUTH_OK ? r->user->partition : -1, NULL, false);
}

static void auth_proxy_login(struct ms_session *s, const char *authz, const char *why);

/* Store host: PLAIN acting as authz, which only a front's proxy credential may. */
static void auth_proxied_in(struct ms_session *s, struct sasl_plain *sp, const char *authz)
{
	const char *why;
	bool ok = ms_proxy_credential_ok(s, sp->authcid, sp->passwd, &why);

	sasl_plain_wipe(sp);
	free(sp);
	auth_proxy_login(s, authz, ok ? NULL : why);
}

/* Store host: a front's proxy login as authz (its credential checked: why NULL), or its
   refusal (why). */
static void auth_proxy_login(struct ms_session *s, const char *authz, const char *why)
{
	const char *cred = s->auth_external ? "certificate" : "secret";

	str_lcpy(s->auth_user, authz, sizeof(s->auth_user));
	if (why != NULL) {
		log_info("%016" PRIx64 " managesieve login addr=%s user=%s via=proxy result=fail "
			 "reason=\"%s\" credential=%s",
			 s->id, s->addr, s->auth_user, why, cred);
		reply_no(s, NULL, "Cannot act as another user");
		return;
	}
	log_info("%016" PRIx64 " managesieve login addr=%s user=%s via=proxy credential=%s", s->id,
		 s->addr, s->auth_user, cred);
	s->proxied_in = true;
	s->busy = true;
	bufferevent_disable(s->bev, EV_READ);
	s->req = ldapauth_lookup(s->srv->auth, s->auth_user, proxy_lookup_done, s);
}

/* Store host: SASL EXTERNAL (RFC 4422 appendix A) with the front's TLS client certificate;
   the authorization identity is the user. */
static void auth_external(struct ms_session *s, const char *b64, size_t len)
{
	char authz[SASL_NAME_MAX + 1], why[256];

	if (proxy_external_decode(b64, len, authz) < 0) {
		reply_no(s, NULL, sasl_strerror(SASL_EBASE64));
		return;
	}
	if (authz[0] == '\0') {
		reply_no(s, NULL, "EXTERNAL needs an authorization identity here");
		return;
	}
	auth_proxy_login(s, authz,
			 proxy_external_check(s->bev, ms_proxy_from_front(s), why, sizeof(why)));
}

static void auth_response(struct ms_session *s, const char *b64, size_t len)
{
	struct sasl_plain *sp = xcalloc(1, sizeof(*sp));
	char authz[SASL_NAME_MAX + 1];
	enum sasl_result sr = sasl_plain_decode_authz(b64, len, sp, authz);
	struct authguard_check chk;

	if (sr != SASL_OK) {
		free(sp);
		reply_no(s, NULL,
			 sr == SASL_EAUTHZ ? "Cannot act as another user" : sasl_strerror(sr));
		return;
	}
	if (authz[0] != '\0') {
		auth_proxied_in(s, sp, authz);
		return;
	}
	str_lcpy(s->auth_user, sp->authcid, sizeof(s->auth_user));
	authguard_begin(s->srv->guard, s->id, "sieve", s->host, sp->authcid, &chk);
	if (chk.refused) {
		metrics_inc(MS_LOGINS, MS_LOGIN_THROTTLED, 0);
		sasl_plain_wipe(sp);
		free(sp);
		reply_no(s, "TRYLATER", "Too many failed logins, try again later");
		return;
	}
	s->busy = true;
	bufferevent_disable(s->bev, EV_READ);
	s->plain = sp;
	if (chk.wait_ms > 0) { /* the throttle spaces this check */
		struct timeval tv = { chk.wait_ms / 1000, (chk.wait_ms % 1000) * 1000 };

		s->hold_kind = HOLD_START;
		evtimer_add(s->hold, &tv);
		return;
	}
	auth_start(s);
}

static void cmd_authenticate(struct ms_session *s)
{
	if (s->authed) {
		reply_no(s, NULL, "Already authenticated");
		return;
	}
	if (!s->tls && !s->srv->allow_plaintext && !ms_proxy_from_front(s)) {
		reply_no(s, "ENCRYPT-NEEDED", "Use STARTTLS first");
		return;
	}
	if (s->narg >= 2 && (strcasecmp(s->arg[1].p, "SCRAM-SHA-256") == 0 ||
			     strcasecmp(s->arg[1].p, "SCRAM-SHA-256-PLUS") == 0)) {
		bool plus = strcasecmp(s->arg[1].p, "SCRAM-SHA-256-PLUS") == 0;
		struct sasl_step st;

		if (!scram_offered(s, plus)) {
			reply_no(s, plus && !s->tls ? "ENCRYPT-NEEDED" : NULL,
				 "SCRAM is not offered here");
			return;
		}
		s->scram = sasl_drive_new(plus, scram_offered(s, true), true);
		sasl_drive_start(s->scram, s->narg >= 3 ? s->arg[2].p : NULL,
				 s->narg >= 3 ? s->arg[2].len : 0, &st);
		scram_step(s, &st, true);
		return;
	}
	if (s->narg < 2 ||
	    (strcasecmp(s->arg[1].p, "PLAIN") != 0 && strcasecmp(s->arg[1].p, "EXTERNAL") != 0)) {
		reply_no(s, NULL, "Unsupported SASL mechanism");
		return;
	}
	s->auth_external = strcasecmp(s->arg[1].p, "EXTERNAL") == 0;
	if (s->narg >= 3) {
		if (s->auth_external)
			auth_external(s, s->arg[2].p, s->arg[2].len);
		else
			auth_response(s, s->arg[2].p, s->arg[2].len);
		return;
	}
	s->auth_cont = true;
	out(s, "\"\"\r\n");
}

static void cmd_starttls(struct ms_session *s)
{
	struct bufferevent *tb;

	if (s->tls || s->srv->tls_ctx == NULL) {
		reply_no(s, NULL, s->tls ? "Already in TLS" : "TLS is not configured");
		return;
	}
	out(s, "OK \"Begin TLS negotiation now\"\r\n");
	tb = tls_starttls_server(s->bev, s->srv->tls_ctx, NULL);
	if (tb == NULL) {
		closing(s);
		return;
	}
	s->bev = tb;
	s->tls = true;
	s->need = 0;
	if (ms_proxy_from_front(s))
		proxy_fronts_ask_cert(tb); /* a front may log in by its certificate */
	set_callbacks(s);
	capabilities(s); /* RFC 5804 2.2: the capabilities again after the handshake */
}

struct ms_write {
	struct ms_session *s;
	int op;
	char name[STORE_SIEVE_NAME_MAX + 1], to[STORE_SIEVE_NAME_MAX + 1];
	struct sieve_admin_op put;
	char *src;
};

enum { W_PUT, W_ACTIVATE, W_DELETE, W_RENAME };

static int ensure_user(struct store_txn *t, const char *user)
{
	struct store_user u;
	uint64_t id;
	int rc = store_user_get(t, user, &u);

	return rc == STORE_ENOUSER ? store_user_create(t, user, &id) : rc;
}

static int write_fn(struct store_txn *t, void *arg)
{
	struct ms_write *w = arg;
	const char *user = w->s->user;
	int rc;

	if ((rc = ensure_user(t, user)) != 0)
		return rc;
	switch (w->op) {
	case W_PUT:
		return sieve_admin_put_fn(t, &w->put);
	case W_ACTIVATE:
		return store_sieve_activate(t, user, w->name[0] ? w->name : NULL);
	case W_DELETE:
		return store_sieve_delete(t, user, w->name);
	default:
		return store_sieve_rename(t, user, w->name, w->to);
	}
}

static void write_done(int result, const struct store_rcpt *rcpts, size_t n, uint64_t value,
		       void *arg)
{
	struct ms_write *w = arg;
	struct ms_session *s = w->s;

	if (!s->dead) {
		if (result == 0)
			out(s, "OK\r\n");
		else if (w->op == W_PUT && w->put.quota)
			reply_no(s,
				 strstr(w->put.why, "scripts") ? "QUOTA/MAXSCRIPTS"
							       : "QUOTA/MAXSIZE",
				 w->put.why);
		else if (result == STORE_ENOMSG)
			reply_no(s, "NONEXISTENT", "No such script");
		else if (result == STORE_EEXIST)
			reply_no(s, "ALREADYEXISTS", "A script of that name exists");
		else if (result == STORE_ENOTSUP)
			reply_no(s, "ACTIVE", "The script is active");
		else if (result == STORE_EINVAL)
			reply_no(s, NULL, "Invalid script name");
		else
			reply_no(s, "TRYLATER", store_strerror(result));
		log_info("%016" PRIx64 " managesieve user=%s %s %s result=%s", s->id, s->user,
			 w->op == W_PUT        ? "putscript"
			 : w->op == W_ACTIVATE ? "setactive"
			 : w->op == W_DELETE   ? "deletescript"
					       : "renamescript",
			 w->name, result ? store_strerror(result) : "ok");
	}
	sieve_admin_op_clear(&w->put);
	free(w->src);
	free(w);
	resume(s);
}

static void submit(struct ms_session *s, struct ms_write *w)
{
	w->s = s;
	s->busy = true;
	bufferevent_disable(s->bev, EV_READ);
	store_gc_submit(s->srv->gc, s->part, NULL, write_fn, w, write_done, w);
}

static void cmd_putscript(struct ms_session *s, bool check)
{
	const struct ms_arg *src = &s->arg[check ? 1 : 2];
	struct ms_write *w;
	char *err = NULL;

	if (s->narg != (check ? 2 : 3) || (!check && !name_ok(&s->arg[1]))) {
		reply_no(s, NULL,
			 check ? "Expected: CHECKSCRIPT script"
			       : "Expected: PUTSCRIPT name script");
		return;
	}
	w = xcalloc(1, sizeof(*w));
	w->src = xmemdup0(src->p, src->len);
	w->put = (struct sieve_admin_op){
		.l = &s->srv->lim, .user = s->user, .name = w->name, .src = w->src, .len = src->len
	};
	if (!check)
		str_lcpy(w->name, s->arg[1].p, sizeof(w->name));
	if (sieve_admin_compile(&w->put, &err) < 0) {
		reply_no(s, NULL, err);
		free(err);
		free(w->src);
		free(w);
		return;
	}
	if (check) {
		out(s, "OK\r\n");
		sieve_admin_op_clear(&w->put);
		free(w->src);
		free(w);
		return;
	}
	w->op = W_PUT;
	submit(s, w);
}

static int list_cb(const struct store_sieve_script *sc, void *arg)
{
	struct ms_session *s = arg;

	out_quoted(s, sc->name, sc->name_len);
	out(s, "%s\r\n", sc->active ? " ACTIVE" : "");
	return 0;
}

static void cmd_read(struct ms_session *s, const char *verb)
{
	struct store_txn *t;
	struct store_sieve_script sc;
	int rc;

	if ((rc = store_txn_begin(s->srv->store, s->part, STORE_TXN_READ, &t)) != 0) {
		reply_no(s, "TRYLATER", store_strerror(rc));
		return;
	}
	if (strcasecmp(verb, "LISTSCRIPTS") == 0) {
		rc = store_sieve_list(t, s->user, list_cb, s);
		if (rc == 0 || rc == STORE_ENOUSER)
			out(s, "OK\r\n");
		else
			reply_no(s, "TRYLATER", store_strerror(rc));
	} else if (strcasecmp(verb, "GETSCRIPT") == 0) {
		if (s->narg != 2)
			reply_no(s, NULL, "Expected: GETSCRIPT name");
		else if ((rc = store_sieve_get(t, s->user, s->arg[1].p, &sc)) == 0) {
			out(s, "{%zu}\r\n", sc.src_len);
			evbuffer_add(bufferevent_get_output(s->bev), sc.src, sc.src_len);
			out(s, "\r\nOK\r\n");
		} else {
			reply_no(s,
				 rc == STORE_ENOMSG || rc == STORE_ENOUSER ? "NONEXISTENT"
									   : "TRYLATER",
				 rc == STORE_ENOMSG || rc == STORE_ENOUSER ? "No such script"
									   : store_strerror(rc));
		}
	} else { /* HAVESPACE name size */
		uint64_t n = 0, bytes = 0, size;
		const struct sieve_admin_limits *l = &s->srv->lim;

		if (s->narg != 3 || !name_ok(&s->arg[1]) ||
		    str_to_u64(s->arg[2].p, s->arg[2].len, UINT32_MAX, &size) < 0) {
			reply_no(s, NULL, "Expected: HAVESPACE name size");
		} else {
			rc = store_sieve_usage(t, s->user, &n, &bytes);
			if (rc == 0 && store_sieve_get(t, s->user, s->arg[1].p, &sc) == 0) {
				n--;
				bytes -= sc.src_len;
			}
			if (size > l->max_script_size)
				reply_no(s, "QUOTA/MAXSIZE", "Script too large");
			else if (n + 1 > l->max_scripts)
				reply_no(s, "QUOTA/MAXSCRIPTS", "Too many scripts");
			else if (bytes + size > l->max_storage)
				reply_no(s, "QUOTA/MAXSIZE", "Not enough space for scripts left");
			else
				out(s, "OK\r\n");
		}
	}
	store_txn_abort(&t);
}

static void dispatch(struct ms_session *s)
{
	const char *verb = s->arg[0].p;
	struct ms_write *w;

	ms_metrics_command(s, s->arg[0].atom ? verb : NULL);
	if (!s->arg[0].atom) {
		reply_no(s, NULL, "Expected a command");
		return;
	}
	if (strcasecmp(verb, "LOGOUT") == 0) {
		out(s, "OK \"Logout\"\r\n");
		closing(s);
		return;
	}
	if (strcasecmp(verb, "CAPABILITY") == 0) {
		capabilities(s);
		return;
	}
	if (strcasecmp(verb, "NOOP") == 0) {
		if (s->narg > 1) {
			out(s, "OK (TAG ");
			out_quoted(s, s->arg[1].p, s->arg[1].len);
			out(s, ") \"Done\"\r\n");
		} else {
			out(s, "OK \"Done\"\r\n");
		}
		return;
	}
	if (strcasecmp(verb, "STARTTLS") == 0) {
		cmd_starttls(s);
		return;
	}
	if (strcasecmp(verb, "AUTHENTICATE") == 0) {
		cmd_authenticate(s);
		return;
	}
	if (!s->authed) {
		reply_no(s, NULL, "Authenticate first");
		return;
	}
	if (strcasecmp(verb, "PUTSCRIPT") == 0 || strcasecmp(verb, "CHECKSCRIPT") == 0) {
		cmd_putscript(s, strcasecmp(verb, "CHECKSCRIPT") == 0);
		return;
	}
	if (strcasecmp(verb, "LISTSCRIPTS") == 0 || strcasecmp(verb, "GETSCRIPT") == 0 ||
	    strcasecmp(verb, "HAVESPACE") == 0) {
		cmd_read(s, verb);
		return;
	}
	int op = strcasecmp(verb, "SETACTIVE") == 0      ? W_ACTIVATE
		 : strcasecmp(verb, "DELETESCRIPT") == 0 ? W_DELETE
		 : strcasecmp(verb, "RENAMESCRIPT") == 0 ? W_RENAME
							 : -1;
	int want = op == W_RENAME ? 3 : 2;
	if (op < 0) {
		reply_no(s, NULL, "Unknown command");
		return;
	}
	if (s->narg != want || (op != W_ACTIVATE && !name_ok(&s->arg[1])) ||
	    (op == W_RENAME && !name_ok(&s->arg[2])) || s->arg[1].len > STORE_SIEVE_NAME_MAX) {
		reply_no(s, NULL,
			 op == W_RENAME ? "Expected: RENAMESCRIPT old new"
					: "Expected: one script name");
		return;
	}
	w = xcalloc(1, sizeof(*w));
	w->op = op;
	str_lcpy(w->name, s->arg[1].p, sizeof(w->name));
	if (op == W_RENAME)
		str_lcpy(w->to, s->arg[2].p, sizeof(w->to));
	submit(s, w);
}

static void read_cb(struct bufferevent *bev, void *arg)
{
	struct ms_session *s = arg;
	struct evbuffer *in = bufferevent_get_input(s->bev);
	const char *err;
	int rc;

	while (!s->busy && !s->closing) {
		if (s->discard_left > 0 || s->discard_line) {
			size_t n = evbuffer_get_length(in);

			if (s->discard_left > 0) {
				size_t k = n < s->discard_left ? n : (size_t)s->discard_left;

				evbuffer_drain(in, k);
				s->discard_left -= k;
				if (s->discard_left > 0)
					return;
				s->discard_line = true;
			}
			struct evbuffer_ptr eol = evbuffer_search(in, "\n", 1, NULL);
			if (eol.pos < 0) {
				evbuffer_drain(in, evbuffer_get_length(in));
				return;
			}
			evbuffer_drain(in, (size_t)eol.pos + 1);
			s->discard_line = false;
			continue;
		}
		rc = parse_cmd(s, in, &err);
		if (rc == P_MORE)
			return;
		if (rc == P_ERR) {
			reply_no(s, strcmp(err, "script too large") == 0 ? "QUOTA/MAXSIZE" : NULL,
				 err);
			if (s->discard_left > 0)
				continue;
			continue;
		}
		if (s->auth_cont) {
			s->auth_cont = false;
			if (s->arg[0].len == 1 && s->arg[0].p[0] == '*' && s->arg[0].atom) {
				scram_end(s);
				reply_no(s, NULL, "Authentication cancelled");
			} else if (s->scram != NULL) {
				struct sasl_step st;

				sasl_drive_response(s->scram, s->bev, s->arg[0].p, s->arg[0].len,
						    &st);
				scram_step(s, &st, true);
			} else if (s->auth_external) {
				auth_external(s, s->arg[0].p, s->arg[0].len);
			} else {
				auth_response(s, s->arg[0].p, s->arg[0].len);
			}
			continue;
		}
		dispatch(s);
	}
}
