/* ma_util.c — what the parts of libheron_mailauth share: the resolver over dns/dns.h,
 * verdict names, the header/body split of a streaming message, header fields, base64 with
 * folding white space, domain comparison. */
#include <string.h>

#include <openssl/evp.h>

#include "common/rfc5322.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "mailauth/mailauth.h"

static void *dns_lookup_fn(void *ctx, const char *name, enum dns_type type, dns_cb *cb, void *arg)
{
	return dns_lookup(ctx, name, type, cb, arg);
}

static void dns_cancel_fn(void *ctx, void *q)
{
	struct dns_query *dq = q;

	(void)ctx;
	dns_cancel(&dq);
}

void ma_resolver_dns(struct ma_resolver *r, struct dns *d)
{
	r->lookup = dns_lookup_fn;
	r->cancel = dns_cancel_fn;
	r->ctx = d;
}

const char *ma_result_str(enum ma_result r)
{
	static const char *const names[] = {
		"none", "pass", "fail", "softfail", "neutral", "temperror", "permerror", "policy",
	};

	return (size_t)r < sizeof(names) / sizeof(names[0]) ? names[r] : "none";
}

void ma_msg_init(struct ma_msg *m)
{
	memset(m, 0, sizeof(*m));
	buf_init(&m->hdr, 0, MA_HEADER_MAX);
	m->bol = true;
}

void ma_msg_release(struct ma_msg *m)
{
	buf_release(&m->hdr);
	free(m->fields);
	m->fields = NULL;
	m->nfields = 0;
}

static void split_fields(struct ma_msg *m)
{
	bool more = false;

	m->done = true;
	m->fields = xcalloc(MA_FIELDS_MAX, sizeof(*m->fields));
	m->nfields = ma_headers_split(m->hdr.data, m->hdr.len, m->fields, MA_FIELDS_MAX, &more);
	if (more)
		m->overflow = true;
}

static void keep(struct ma_msg *m, const char *p, size_t n)
{
	if (!m->overflow && buf_append(&m->hdr, p, n) < 0)
		m->overflow = true;
}

size_t ma_msg_feed(struct ma_msg *m, const char *p, size_t n)
{
	size_t i = 0, start = 0;

	if (m->done)
		return 0;
	for (; i < n; i++) {
		char c = p[i];

		if (m->bol_cr) {
			/* a CR held at the start of a line: CRLF there is the empty line */
			m->bol_cr = false;
			if (c == '\n') {
				split_fields(m);
				return i + 1;
			}
			keep(m, "\r", 1);
			m->bol = false;
		}
		if (m->bol && c == '\n') {
			keep(m, p + start, i - start);
			split_fields(m);
			return i + 1;
		}
		if (m->bol && c == '\r') {
			keep(m, p + start, i - start);
			start = i + 1;
			m->bol_cr = true;
			continue;
		}
		m->bol = c == '\n';
	}
	keep(m, p + start, n - start);
	return n;
}

void ma_msg_end(struct ma_msg *m)
{
	if (!m->done) {
		if (m->bol_cr)
			keep(m, "\r", 1);
		split_fields(m);
	}
}

size_t ma_headers_split(const char *hdr, size_t len, struct ma_header *out, size_t max,
			bool *more_r)
{
	size_t pos = 0, n = 0;
	struct str_view name, raw;

	*more_r = false;
	while (rfc5322_header_next(hdr, len, &pos, &name, &raw) == 1) {
		if (n == max) {
			*more_r = true;
			break;
		}
		out[n].name = name.p;
		out[n].nlen = name.len;
		out[n].raw = raw.p;
		out[n].len = raw.len;
		n++;
	}
	return n;
}

bool ma_header_is(const struct ma_header *h, const char *name)
{
	size_t n = h->nlen;

	while (n > 0 && (h->name[n - 1] == ' ' || h->name[n - 1] == '\t'))
		n--;
	return str_caseeq(h->name, n, name, strlen(name));
}

void ma_header_value(const struct ma_header *h, const char **v_r, size_t *len_r)
{
	const char *colon = memchr(h->raw, ':', h->len);
	size_t off = colon != NULL ? (size_t)(colon - h->raw) + 1 : h->len;
	size_t end = h->len;

	if (end >= off + 1 && h->raw[end - 1] == '\n')
		end--;
	if (end >= off + 1 && h->raw[end - 1] == '\r')
		end--;
	*v_r = h->raw + off;
	*len_r = end - off;
}

int ma_b64_decode_fws(const char *p, size_t len, unsigned char *out, size_t size)
{
	unsigned acc = 0, bits = 0;
	size_t n = 0, pad = 0, digits = 0;

	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)p[i];
		int v;

		if (c == ' ' || c == '\t' || c == '\r' || c == '\n')
			continue;
		if (c == '=') {
			pad++;
			continue;
		}
		if (pad > 0 || (v = str_b64_digit(c, '/')) < 0)
			return -1; /* a digit after padding, or not base64 */
		digits++;
		acc = (acc << 6) | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (n == size)
				return -1;
			out[n++] = (unsigned char)(acc >> bits);
			acc &= (1u << bits) - 1;
		}
	}
	if (pad > 2 || (digits + pad) % 4 != 0 || (pad > 0 && digits % 4 + pad != 4))
		return -1;
	return (int)n;
}

size_t ma_b64_encode(const unsigned char *p, size_t n, char *out)
{
	return (size_t)EVP_EncodeBlock((unsigned char *)out, p, (int)n);
}

bool ma_domain_under(const char *d, const char *parent)
{
	size_t dl = strlen(d), pl = strlen(parent);

	if (dl == pl)
		return str_caseeq(d, dl, parent, pl);
	return dl > pl && d[dl - pl - 1] == '.' && str_caseeq(d + dl - pl, pl, parent, pl);
}
