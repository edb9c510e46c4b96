/* mtad_auth.c — owns sender authentication in mtad (libheron_mailauth): DKIM signing of mail
 * submitted by authenticated users or trusted networks, and on the listen listener (port 25,
 * from outside trusted_networks) SPF of MAIL FROM and HELO, DKIM of every signature and
 * DMARC, reported in one Authentication-Results header with our authserv-id (existing ones
 * claiming it are removed) and acted on: DMARC p=reject -> 550 5.7.1, quarantine -> Junk,
 * SPF fail -> 550 at MAIL FROM when configured.
 *
 * The hooks (mtad.h): mtad_auth_mail when MAIL FROM is accepted, mtad_auth_data_start after
 * our Received: is written, mtad_auth_data with each piece of the client's message as it goes
 * to the file, mtad_auth_end at the end of the data before the delivery. Every lookup goes
 * through the worker's asynchronous resolver; the session waits in ST_WAIT, never the loop.
 * The new header fields go above the message with deliver_replace_head. */
#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "common/conf.h"
#include "common/log.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "mailauth/authres.h"
#include "mailauth/dkim.h"
#include "mailauth/dmarc.h"
#include "mailauth/psl.h"
#include "mailauth/spf.h"
#include "mtad/milter.h"
#include "mtad/mtad.h"

/* A worker's keys and list (m->auth). */
struct mtad_auth {
	struct dkim_signkey **keys;
	size_t nkeys;
	char **headers; /* [dkim] sign_headers, lower case, or NULL: the default */
	size_t nheaders;
	struct psl *psl;
	struct ma_resolver res;
	bool has_res;
};

/* One transaction's state (tx->auth). */
struct mtad_auth_tx {
	struct smtp_session *s;
	bool sign, verify;
	struct event *step; /* continues from the loop after an answer */
	/* the message */
	char *received; /* our Received: field, above the client's bytes */
	size_t received_len;
	struct ma_msg msg;
	uint64_t hdr_bytes; /* the client's bytes that were header (with the empty line) */
	bool empty_line;    /* the header ended with an empty line */
	EVP_MD_CTX *md;     /* signing: the relaxed body's SHA-256 */
	struct dkim_body body;
	struct dkim_verifier *dv;
	/* answers */
	struct spf *spf, *helo_spf;
	struct spf_verdict spfv, helov;
	bool spf_pending, helo_pending, helo_checked, spf_checked;
	bool spf_is_helo; /* null sender: MAIL FROM's result is HELO's */
	bool mail_wait;   /* MAIL FROM's reply waits for SPF */
	bool dkim_pending, ended, dmarc_started, dmarc_pending;
	struct dmarc *dmarc;
	struct dmarc_verdict dmv;
	bool dmarc_checked;
	char from_domain[DNS_NAME_MAX + 1];
};

static void step_cb(evutil_socket_t fd, short what, void *arg);

/* Text from a remote zone (an SPF explanation) made safe for a reply line: printable ASCII
   only, at most size - 1 bytes. */
static void reply_text(const char *in, char *out, size_t size)
{
	size_t n = 0;

	for (; *in != '\0' && n + 1 < size; in++)
		out[n++] = (*in >= 0x20 && *in < 0x7f) ? *in : '?';
	out[n] = '\0';
}

static bool inbound(const struct smtp_session *s)
{
	return s->kind == L_SMTP && !(s->flags & (SF_TRUSTED | SF_AUTH)) && s->m->auth != NULL &&
	       s->m->auth->has_res;
}

static bool signs(const struct smtp_session *s)
{
	return s->kind != L_LMTP && (s->flags & (SF_TRUSTED | SF_AUTH)) && s->m->auth != NULL &&
	       s->m->auth->nkeys > 0;
}

/* "domain:selector:keyfile" entries separated by spaces or commas. */
static int load_keys(struct mtad_auth *a, const char *spec, char **error_r)
{
	char *copy = xstrdup(spec), *save = NULL;

	for (char *e = strtok_r(copy, " \t,", &save); e != NULL;
	     e = strtok_r(NULL, " \t,", &save)) {
		char *sel = strchr(e, ':'), *file = sel != NULL ? strchr(sel + 1, ':') : NULL;
		struct dkim_signkey *k;

		if (file == NULL) {
			*error_r = xasprintf("[dkim] sign: \"%s\" is not domain:selector:keyfile",
					     e);
			free(copy);
			return -1;
		}
		*sel++ = '\0';
		*file++ = '\0';
		str_lower(e, strlen(e));
		if (dkim_signkey_load(e, sel, file, &k, error_r) < 0) {
			free(copy);
			return -1;
		}
		a->keys = xreallocarray(a->keys, a->nkeys + 1, sizeof(*a->keys));
		a->keys[a->nkeys++] = k;
	}
	free(copy);
	return 0;
}

/* [dkim] sign_headers, lower case, From added when missing (it is always signed). */
static void load_headers(struct mtad_auth *a, const struct conf *c)
{
	const struct conf_list *l = conf_values(c)->dkim.sign_headers;
	bool from = false;

	if (l->n == 0)
		return;
	a->headers = xcalloc(l->n + 1, sizeof(*a->headers));
	for (size_t i = 0; i < l->n; i++) {
		char *h = xstrdup(l->v[i]);

		str_lower(h, strlen(h));
		from |= strcmp(h, "from") == 0;
		a->headers[a->nheaders++] = h;
	}
	if (!from)
		a->headers[a->nheaders++] = xstrdup("from");
}

int mtad_auth_init(struct mtad *m, const struct conf *c, char **error_r)
{
	const struct heron_conf *hc = conf_values(c);
	struct mtad_auth *a = xcalloc(1, sizeof(*a));

	if (load_keys(a, hc->dkim.sign, error_r) < 0) {
		m->auth = a;
		mtad_auth_free(m);
		return -1;
	}
	load_headers(a, c);
	if (hc->dmarc.verify && psl_load(hc->dmarc.psl, &a->psl, error_r) < 0) {
		m->auth = a;
		mtad_auth_free(m);
		return -1;
	}
	if ((hc->dmarc.verify || hc->dkim.verify || hc->spf.verify) && m->dns != NULL) {
		ma_resolver_dns(&a->res, m->dns);
		a->has_res = true;
	}
	m->auth = a;
	return 0;
}

static void keys_free(struct mtad_auth *a)
{
	for (size_t i = 0; i < a->nkeys; i++)
		dkim_signkey_free(&a->keys[i]);
	free(a->keys);
	for (size_t i = 0; i < a->nheaders; i++)
		free(a->headers[i]);
	free(a->headers);
	a->keys = NULL;
	a->headers = NULL;
	a->nkeys = a->nheaders = 0;
}

void mtad_auth_reload(struct mtad *m, const struct conf *c)
{
	struct mtad_auth *a = m->auth;
	struct mtad_auth n = { 0 };
	char *err = NULL;

	if (a == NULL)
		return;
	/* the PSL and the resolver stay: pending DMARC checks use them */
	if (load_keys(&n, conf_values(c)->dkim.sign, &err) < 0) {
		log_warnx("dkim: %s (the previous [dkim] keys stay in force)", err);
		free(err);
		keys_free(&n);
		return;
	}
	load_headers(&n, c);
	keys_free(a);
	a->keys = n.keys;
	a->nkeys = n.nkeys;
	a->headers = n.headers;
	a->nheaders = n.nheaders;
}

void mtad_auth_free(struct mtad *m)
{
	struct mtad_auth *a = m->auth;

	if (a == NULL)
		return;
	keys_free(a);
	psl_free(&a->psl);
	free(a);
	m->auth = NULL;
}

void mtad_auth_tx_free(struct smtp_tx *tx)
{
	struct mtad_auth_tx *at = tx->auth;

	if (at == NULL)
		return;
	spf_free(&at->spf);
	spf_free(&at->helo_spf);
	dmarc_free(&at->dmarc);
	dkim_verifier_free(&at->dv);
	EVP_MD_CTX_free(at->md);
	ma_msg_release(&at->msg);
	free(at->received);
	if (at->step != NULL)
		event_free(at->step);
	free(at);
	tx->auth = NULL;
}

static void kick(struct mtad_auth_tx *at)
{
	event_active(at->step, EV_TIMEOUT, 0);
}

/* ---- SPF ---- */

static void spf_done(const struct spf_verdict *v, void *arg)
{
	struct mtad_auth_tx *at = arg;

	at->spfv = *v;
	at->spf_pending = false;
	kick(at);
}

static void helo_done(const struct spf_verdict *v, void *arg)
{
	struct mtad_auth_tx *at = arg;

	at->helov = *v;
	at->helo_pending = false;
	if (at->spf_is_helo) {
		at->spfv = *v;
		at->spf_pending = false;
	}
	kick(at);
}

static void spf_request(const struct smtp_session *s, struct spf_ip *ip, struct spf_request *rq,
			const char *domain)
{
	memset(rq, 0, sizeof(*rq));
	rq->ip = *ip;
	rq->sender = s->tx->from;
	rq->helo = s->helo;
	rq->domain = domain;
	rq->receiver = s->m->hostname;
	rq->now = (int64_t)time(NULL);
}

/* The client's address (s->addr has its port too). */
static int peer_ip(const struct smtp_session *s, struct spf_ip *ip)
{
	char text[INET6_ADDRSTRLEN];
	const void *a;

	if (s->ss.ss_family == AF_INET)
		a = &((const struct sockaddr_in *)&s->ss)->sin_addr;
	else if (s->ss.ss_family == AF_INET6)
		a = &((const struct sockaddr_in6 *)&s->ss)->sin6_addr;
	else
		return -1;
	if (inet_ntop(s->ss.ss_family, a, text, sizeof(text)) == NULL)
		return -1;
	return spf_ip_parse(text, ip);
}

/* The HELO name is checked when it is a domain name (not an address literal). */
static bool helo_checkable(const struct smtp_session *s)
{
	return s->helo[0] != '\0' && s->helo[0] != '[' && strchr(s->helo, '.') != NULL &&
	       dns_name_valid(s->helo);
}

static void start_spf(struct smtp_session *s, struct mtad_auth_tx *at)
{
	const struct heron_conf *hc = conf_values(s->m->conf);
	const struct ma_resolver *r = &s->m->auth->res;
	struct spf_request rq;
	struct spf_ip ip;
	const char *at_sign = strrchr(s->tx->from, '@');

	if (peer_ip(s, &ip) < 0)
		return;
	if (hc->spf.helo && helo_checkable(s)) {
		spf_request(s, &ip, &rq, s->helo);
		at->helo_checked = true;
		at->helo_pending = spf_check(r, &rq, helo_done, at, &at->helo_spf, &at->helov) ==
				   0;
	}
	if (s->tx->from[0] == '\0') {
		/* the null sender: MAIL FROM's identity is postmaster@HELO (RFC 7208 2.4) */
		if (at->helo_checked) {
			at->spf_checked = at->spf_is_helo = true;
			at->spf_pending = at->helo_pending;
			at->spfv = at->helov;
		}
		return;
	}
	if (at_sign == NULL || !dns_name_valid(at_sign + 1))
		return;
	spf_request(s, &ip, &rq, at_sign + 1);
	at->spf_checked = true;
	at->spf_pending = spf_check(r, &rq, spf_done, at, &at->spf, &at->spfv) == 0;
}

/* MAIL FROM's reply once SPF is known: refused when it failed and reject_fail is on. */
static void mail_reply(struct smtp_session *s, struct mtad_auth_tx *at)
{
	at->mail_wait = false;
	if (at->spfv.result == MA_FAIL) {
		char exp[200];

		reply_text(at->spfv.explanation, exp, sizeof(exp));
		log_info("%016" PRIx64 " smtp mail qid=%016" PRIx64 " from=<%s> result=fail "
			 "reason=\"spf fail\" addr=%s",
			 s->id, s->tx->qid, s->tx->from, s->addr);
		smtp_tx_free(&s->tx); /* and at with it */
		s->ntx--;
		smtp_set_state(s, ST_READY);
		smtp_reply(s, "550 5.7.23 SPF validation failed%s%s", exp[0] ? ": " : "", exp);
		smtp_resume(s);
	} else {
		smtp_set_state(s, ST_MAIL);
		smtp_mail_accepted(s, true); /* the milters, then the 250 */
	}
}

bool mtad_auth_mail(struct smtp_session *s)
{
	const struct heron_conf *hc = conf_values(s->m->conf);
	struct mtad_auth_tx *at;
	bool verify = inbound(s) && (hc->spf.verify || hc->dkim.verify || hc->dmarc.verify);

	if (!verify && !signs(s))
		return false;
	at = xcalloc(1, sizeof(*at));
	at->s = s;
	at->sign = !verify && signs(s);
	at->verify = verify;
	at->step = event_new(s->m->base, -1, 0, step_cb, at);
	ma_msg_init(&at->msg);
	s->tx->auth = at;
	if (verify && hc->spf.verify)
		start_spf(s, at);
	if (!(verify && hc->spf.reject_fail && at->spf_checked))
		return false;
	if (!at->spf_pending) {
		if (at->spfv.result != MA_FAIL)
			return false;
		smtp_set_state(s, ST_WAIT);
		at->mail_wait = true;
		kick(at);
		return true;
	}
	smtp_set_state(s, ST_WAIT);
	at->mail_wait = true;
	return true;
}

/* ---- the message ---- */

void mtad_auth_data_start(struct smtp_session *s, const char *received, size_t len)
{
	struct mtad_auth_tx *at = s->tx->auth;

	if (at == NULL)
		return;
	at->received = xmalloc(len);
	memcpy(at->received, received, len);
	at->received_len = len;
	if (at->sign) {
		at->md = EVP_MD_CTX_new();
		if (at->md == NULL || EVP_DigestInit_ex(at->md, EVP_sha256(), NULL) != 1)
			fatalx("sha256 digest");
		dkim_body_init(&at->body, DKIM_RELAXED, at->md, UINT64_MAX);
	}
}

static void header_done(struct smtp_session *s, struct mtad_auth_tx *at)
{
	const struct heron_conf *hc = conf_values(s->m->conf);

	if (at->verify && hc->dkim.verify) {
		struct dkim_verify_opts o = { .min_rsa_bits = (unsigned)hc->dkim.min_rsa_bits,
					      .now = (int64_t)time(NULL) };

		at->dv = dkim_verifier_new(&o, at->msg.fields, at->msg.nfields, at->msg.overflow);
	}
}

static void body_bytes(struct mtad_auth_tx *at, const char *p, size_t n)
{
	if (n == 0)
		return;
	if (at->md != NULL)
		dkim_body_feed(&at->body, p, n);
	if (at->dv != NULL)
		dkim_verifier_body(at->dv, p, n);
}

void mtad_auth_data(struct smtp_session *s, const char *p, size_t n)
{
	struct mtad_auth_tx *at = s->tx->auth;

	if (at == NULL || at->received == NULL)
		return;
	if (!at->msg.done) {
		size_t used = ma_msg_feed(&at->msg, p, n);

		at->hdr_bytes += used;
		if (!at->msg.done)
			return;
		at->empty_line = true;
		header_done(s, at);
		p += used;
		n -= used;
	}
	body_bytes(at, p, n);
}

/* The domain of the From field's address (lower case) into out; the number of From fields
   (DMARC needs exactly one naming one domain: else out is ""). */
static size_t from_domain(const struct ma_msg *m, char *out, size_t size)
{
	size_t nfrom = 0;

	out[0] = '\0';
	for (size_t i = 0; i < m->nfields; i++) {
		const char *v, *lt, *end, *dom;
		size_t len;

		if (!ma_header_is(&m->fields[i], "from"))
			continue;
		if (++nfrom > 1) {
			out[0] = '\0';
			continue;
		}
		ma_header_value(&m->fields[i], &v, &len);
		end = v + len;
		lt = memrchr(v, '<', len);
		if (lt != NULL) {
			const char *gt = memchr(lt, '>', (size_t)(end - lt));

			v = lt + 1;
			end = gt != NULL ? gt : end;
		}
		dom = memrchr(v, '@', (size_t)(end - v));
		if (dom == NULL)
			continue;
		dom++;
		while (end > dom && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r' ||
				     end[-1] == '\n' || end[-1] == '.'))
			end--;
		len = (size_t)(end - dom);
		if (len == 0 || len >= size || memchr(dom, ',', len) != NULL)
			continue;
		memcpy(out, dom, len);
		out[len] = '\0';
		str_lower(out, len);
		if (!dns_name_valid(out))
			out[0] = '\0';
	}
	return nfrom;
}

/* ---- signing ---- */

/* The keys for domain: those of the longest configured domain it equals or lies below. */
static size_t pick_keys(const struct mtad_auth *a, const char *domain,
			const struct dkim_signkey **out, size_t max)
{
	const char *best = NULL;
	size_t n = 0;

	for (size_t i = 0; i < a->nkeys; i++)
		if (ma_domain_under(domain, a->keys[i]->domain) &&
		    (best == NULL || strlen(a->keys[i]->domain) > strlen(best)))
			best = a->keys[i]->domain;
	for (size_t i = 0; best != NULL && i < a->nkeys && n < max; i++)
		if (strcmp(a->keys[i]->domain, best) == 0)
			out[n++] = a->keys[i];
	return n;
}

#define SIGN_KEYS_MAX 8
#define SIGNATURES_MAX (64 * 1024) /* the DKIM-Signature fields of one message, all keys */

/* Signs with the From domain's keys; the signatures go above the message. -1: 451. */
static int sign_message(struct smtp_session *s, struct mtad_auth_tx *at)
{
	const struct heron_conf *hc = conf_values(s->m->conf);
	const struct mtad_auth *a = s->m->auth;
	const struct dkim_signkey *keys[SIGN_KEYS_MAX];
	char domain[DNS_NAME_MAX + 1];
	unsigned char bh[32];
	unsigned bhlen = 0;
	struct buf sigs;
	size_t nk;
	int rc = 0;

	if (at->msg.overflow || from_domain(&at->msg, domain, sizeof(domain)) != 1 ||
	    domain[0] == '\0' || (nk = pick_keys(a, domain, keys, SIGN_KEYS_MAX)) == 0) {
		log_info("%016" PRIx64 " dkim sign qid=%016" PRIx64 " result=none "
			 "reason=\"%s\"",
			 s->id, s->tx->qid,
			 at->msg.overflow    ? "header too large"
			 : domain[0] == '\0' ? "no single From domain"
					     : "no key for the domain");
		return 0;
	}
	dkim_body_end(&at->body);
	if (EVP_DigestFinal_ex(at->md, bh, &bhlen) != 1 || bhlen != sizeof(bh))
		fatalx("sha256 digest");
	struct dkim_sign_opts o = { .headers = (const char *const *)a->headers,
				    .nheaders = a->nheaders,
				    .now = (int64_t)time(NULL),
				    .expire_s = hc->dkim.signature_ttl_ms / 1000 };
	buf_init(&sigs, 1024, SIGNATURES_MAX);
	for (size_t i = 0; i < nk; i++) {
		const char *err = NULL;

		if (dkim_sign(keys[i], at->msg.fields, at->msg.nfields, bh, &o, &sigs, &err) < 0) {
			log_warnx("%016" PRIx64 " dkim sign qid=%016" PRIx64 " d=%s s=%s "
				  "result=fail reason=\"%s\"",
				  s->id, s->tx->qid, keys[i]->domain, keys[i]->selector,
				  err != NULL ? err : "?");
			rc = -1;
			break;
		}
		log_info("%016" PRIx64 " dkim sign qid=%016" PRIx64 " d=%s s=%s a=%s result=ok",
			 s->id, s->tx->qid, keys[i]->domain, keys[i]->selector,
			 dkim_alg_name(keys[i]->alg));
	}
	if (rc == 0 && deliver_replace_head(s, sigs.data, sigs.len, 0) < 0)
		rc = -1;
	buf_release(&sigs);
	return rc;
}

/* ---- verification ---- */

static void dkim_done(void *arg)
{
	struct mtad_auth_tx *at = arg;

	at->dkim_pending = false;
	kick(at);
}

static void dmarc_done(const struct dmarc_verdict *v, void *arg)
{
	struct mtad_auth_tx *at = arg;

	at->dmv = *v;
	at->dmarc_pending = false;
	kick(at);
}

static size_t dkim_results(const struct mtad_auth_tx *at, const struct dkim_result **r)
{
	*r = NULL;
	return at->dv != NULL ? dkim_verifier_results(at->dv, r) : 0;
}

static void start_dmarc(struct smtp_session *s, struct mtad_auth_tx *at)
{
	const char *at_sign = strrchr(s->tx->from, '@');
	struct dmarc_input in = { 0 };
	unsigned char rnd[2];

	at->dmarc_started = true;
	if (from_domain(&at->msg, at->from_domain, sizeof(at->from_domain)) != 1 ||
	    at->from_domain[0] == '\0') {
		at->dmarc_checked = true;
		at->dmv.result = MA_PERMERROR;
		at->dmv.reason = "not exactly one From domain";
		return;
	}
	if (RAND_bytes(rnd, sizeof(rnd)) != 1)
		fatalx("RAND_bytes");
	in.from_domain = at->from_domain;
	in.spf = at->spf_checked ? at->spfv.result : MA_NONE;
	in.spf_domain = s->tx->from[0] == '\0' ? s->helo : at_sign != NULL ? at_sign + 1 : "";
	in.ndkim = dkim_results(at, &in.dkim);
	in.psl = s->m->auth->psl;
	in.sample = (unsigned)((rnd[0] << 8 | rnd[1]) % 100);
	at->dmarc_checked = true;
	at->dmarc_pending = dmarc_check(&s->m->auth->res, &in, dmarc_done, at, &at->dmarc,
					&at->dmv) == 0;
}

static void add_prop(char *props, size_t size, const char *name, const char *value)
{
	char v[300];
	size_t len = strlen(props);

	authres_value(value, v, sizeof(v));
	snprintf(props + len, size - len, "%s%s=%s", len > 0 ? " " : "", name, v);
}

/* The Authentication-Results field of the verdicts into ar; the number of results. */
static size_t build_authres(struct smtp_session *s, struct mtad_auth_tx *at, struct buf *ar)
{
	const struct heron_conf *hc = conf_values(s->m->conf);
	const char *id = hc->mtad.authserv_id[0] ? hc->mtad.authserv_id : s->m->hostname;
	const struct dkim_result *r;
	size_t nr = dkim_results(at, &r), n = 0;
	char props[700];

	authres_start(ar, id);
	if (at->spf_checked && s->tx->from[0] != '\0') {
		props[0] = '\0';
		add_prop(props, sizeof(props), "smtp.mailfrom", s->tx->from);
		authres_add(ar, "spf", at->spfv.result, at->spfv.problem, props);
		n++;
	}
	if (at->helo_checked) {
		props[0] = '\0';
		add_prop(props, sizeof(props), "smtp.helo", s->helo);
		authres_add(ar, "spf", at->helov.result, at->helov.problem, props);
		n++;
	}
	if (hc->dkim.verify && nr == 0) {
		authres_add(ar, "dkim", MA_NONE, NULL, "");
		n++;
	}
	for (size_t i = 0; i < nr; i++) {
		props[0] = '\0';
		if (r[i].d[0] != '\0')
			add_prop(props, sizeof(props), "header.d", r[i].d);
		if (r[i].s[0] != '\0')
			add_prop(props, sizeof(props), "header.s", r[i].s);
		if (r[i].b_prefix[0] != '\0')
			add_prop(props, sizeof(props), "header.b", r[i].b_prefix);
		authres_add(ar, "dkim", r[i].result, r[i].reason, props);
		n++;
	}
	if (at->dmarc_checked) {
		char why[80];

		props[0] = '\0';
		if (at->from_domain[0] != '\0')
			add_prop(props, sizeof(props), "header.from", at->from_domain);
		if (at->dmv.result == MA_PASS || at->dmv.result == MA_FAIL)
			snprintf(why, sizeof(why), "p=%s dis=%s", dmarc_policy_str(at->dmv.policy),
				 dmarc_policy_str(at->dmv.action));
		else
			snprintf(why, sizeof(why), "%s", at->dmv.reason ? at->dmv.reason : "");
		authres_add(ar, "dmarc", at->dmv.result, why[0] ? why : NULL, props);
		n++;
	}
	authres_end(ar, n);
	return n;
}

#define AUTHRES_MAX (64 * 1024) /* the Authentication-Results field added above a message */

/* The message's new head: our A-R, then (only when a field claiming our authserv-id must go)
   the Received: and the header without those fields. *skip_r: the bytes it replaces. */
static void build_head(struct smtp_session *s, struct mtad_auth_tx *at, struct buf *head,
		       uint64_t *skip_r)
{
	const struct heron_conf *hc = conf_values(s->m->conf);
	const char *id = hc->mtad.authserv_id[0] ? hc->mtad.authserv_id : s->m->hostname;
	size_t forged = 0;

	build_authres(s, at, head);
	*skip_r = 0;
	for (size_t i = 0; i < at->msg.nfields; i++)
		forged += authres_claims(at->msg.fields[i].raw, at->msg.fields[i].len, id);
	if (forged == 0)
		return;
	log_info("%016" PRIx64 " auth qid=%016" PRIx64 " removed=%zu reason=\"Authentication-"
		 "Results claiming %s\"",
		 s->id, s->tx->qid, forged, id);
	buf_append(head, at->received, at->received_len);
	for (size_t i = 0; i < at->msg.nfields; i++)
		if (!authres_claims(at->msg.fields[i].raw, at->msg.fields[i].len, id))
			buf_append(head, at->msg.fields[i].raw, at->msg.fields[i].len);
	if (at->empty_line)
		buf_append(head, "\r\n", 2);
	*skip_r = at->received_len + at->hdr_bytes;
}

/* The transaction ends here with a refusal (from the loop: input resumes). */
static void refuse(struct smtp_session *s, const char *reply, bool resume)
{
	log_info("%016" PRIx64 " smtp data qid=%016" PRIx64 " from=<%s> result=fail "
		 "reason=\"%s\"",
		 s->id, s->tx->qid, s->tx->from, reply + 10);
	smtp_tx_free(&s->tx);
	smtp_set_state(s, ST_READY);
	smtp_reply(s, "%s", reply);
	if (resume)
		smtp_resume(s);
}

static void verify_finish(struct smtp_session *s, struct mtad_auth_tx *at)
{
	const struct heron_conf *hc = conf_values(s->m->conf);
	const struct dkim_result *r;
	size_t nr = dkim_results(at, &r);
	struct buf head;
	uint64_t skip;
	enum dmarc_policy act = at->dmarc_checked && at->dmv.result == MA_FAIL ? at->dmv.action
									       : DMARC_P_NONE;
	char reply[400];

	log_info("%016" PRIx64 " auth qid=%016" PRIx64 " addr=%s from=<%s> spf=%s helo=%s "
		 "dkim=%s dkims=%zu dmarc=%s header.from=%s action=%s",
		 s->id, s->tx->qid, s->addr, s->tx->from,
		 ma_result_str(at->spf_checked ? at->spfv.result : MA_NONE),
		 ma_result_str(at->helo_checked ? at->helov.result : MA_NONE),
		 ma_result_str(nr > 0 ? r[0].result : MA_NONE), nr,
		 ma_result_str(at->dmarc_checked ? at->dmv.result : MA_NONE),
		 at->from_domain[0] ? at->from_domain : "-", dmarc_policy_str(act));
	if (act == DMARC_P_REJECT && hc->dmarc.reject) {
		snprintf(reply, sizeof(reply), "550 5.7.1 Email rejected per DMARC policy for %s",
			 at->from_domain);
		refuse(s, reply, true);
		return;
	}
	if (act != DMARC_P_NONE && hc->dmarc.quarantine)
		s->tx->quarantine = true;
	buf_init(&head, 1024, at->received_len + MA_HEADER_MAX + AUTHRES_MAX);
	build_head(s, at, &head, &skip);
	if (deliver_replace_head(s, head.data, head.len, skip) < 0) {
		buf_release(&head);
		refuse(s, "451 4.3.0 Local error, try again later", true);
		return;
	}
	buf_release(&head);
	milter_then_commit(s); /* the milters, after our own checks */
}

static void step_cb(evutil_socket_t fd, short what, void *arg)
{
	struct mtad_auth_tx *at = arg;
	struct smtp_session *s = at->s;

	if (at->mail_wait) {
		if (s->dead)
			smtp_resume(s); /* frees the session */
		else if (!at->spf_pending)
			mail_reply(s, at);
		return;
	}
	if (!at->ended)
		return; /* an answer during RCPT: kept for the end of the data */
	if (s->dead) {
		smtp_resume(s);
		return;
	}
	if (at->spf_pending || at->helo_pending || at->dkim_pending || at->dmarc_pending)
		return;
	if (conf_values(s->m->conf)->dmarc.verify && !at->dmarc_started) {
		start_dmarc(s, at);
		if (at->dmarc_pending)
			return;
	}
	verify_finish(s, at);
}

bool mtad_auth_end(struct smtp_session *s)
{
	struct mtad_auth_tx *at = s->tx->auth;

	if (at == NULL || at->received == NULL)
		return false;
	if (!at->msg.done) {
		ma_msg_end(&at->msg);
		header_done(s, at);
	}
	if (at->sign) {
		if (sign_message(s, at) < 0)
			refuse(s, "451 4.3.0 Local error, try again later", false);
		return s->tx == NULL;
	}
	if (!at->verify)
		return false;
	if (at->msg.overflow) {
		refuse(s, "552 5.3.4 Message header size exceeds limit", false);
		return true;
	}
	at->ended = true;
	if (at->dv != NULL)
		at->dkim_pending = dkim_verifier_finish(at->dv, &s->m->auth->res, dkim_done, at) ==
				   0;
	kick(at);
	return true;
}
