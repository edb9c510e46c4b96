/* dns_rr.c — owns reading record data: names in wire form, the rdata of A, AAAA, MX, TXT,
 * TLSA and CNAME records (as libunbound hands them over: uncompressed, length known), and the
 * check that a name is one we look up. Every read is bounded by the rdata length. */
#include <string.h>

#include "dns/dns.h"

bool dns_name_valid(const char *name)
{
	size_t len = strlen(name), label = 0;

	if (len > 0 && name[len - 1] == '.')
		len--;
	if (len == 0 || len > DNS_NAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)name[i];

		if (c == '.') {
			if (label == 0 || name[i - 1] == '-')
				return false;
			label = 0;
			continue;
		}
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_'))
			return false;
		if ((label == 0 && c == '-') || ++label > 63)
			return false;
	}
	return name[len - 1] != '-';
}

int dns_name_from_wire(const uint8_t *p, size_t len, char out[DNS_NAME_MAX + 1], size_t *used_r)
{
	size_t i = 0, o = 0;

	for (;;) {
		if (i >= len)
			return -1;
		uint8_t l = p[i++];

		if (l == 0)
			break;
		if (l > 63 || l > len - i) /* a compression pointer (0xc0) or an overrun */
			return -1;
		if (o + (o > 0) + l > DNS_NAME_MAX)
			return -1;
		if (o > 0)
			out[o++] = '.';
		for (uint8_t k = 0; k < l; k++) {
			unsigned char c = p[i++];

			if (c <= 0x20 || c == '.' || c >= 0x7f)
				return -1;
			out[o++] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
		}
	}
	out[o] = '\0';
	*used_r = i;
	return 0;
}

static int txt_parse(const uint8_t *rdata, size_t len, struct dns_rr *rr, char *buf, size_t size)
{
	size_t i = 0, o = 0;

	if (len == 0)
		return -1;
	while (i < len) {
		uint8_t l = rdata[i++];

		if (l > len - i || o + l >= size)
			return -1;
		for (uint8_t k = 0; k < l; k++) {
			char c = (char)rdata[i++];

			buf[o++] = c == '\0' ? '?' : c; /* a NUL would end the text early */
		}
	}
	buf[o] = '\0';
	rr->u.txt.len = o;
	rr->u.txt.text = buf;
	return 0;
}

int dns_rr_parse(enum dns_type type, const uint8_t *rdata, size_t len, struct dns_rr *rr,
		 char *txtbuf, size_t txtsize)
{
	size_t used;

	memset(rr, 0, sizeof(*rr));
	rr->type = type;
	switch (type) {
	case DNS_T_A:
		if (len != 4)
			return -1;
		memcpy(&rr->u.a, rdata, 4);
		return 0;
	case DNS_T_AAAA:
		if (len != 16)
			return -1;
		memcpy(&rr->u.aaaa, rdata, 16);
		return 0;
	case DNS_T_MX:
		if (len < 3)
			return -1;
		rr->u.mx.pref = (uint16_t)(rdata[0] << 8 | rdata[1]);
		if (dns_name_from_wire(rdata + 2, len - 2, rr->u.mx.host, &used) < 0)
			return -1;
		return used == len - 2 ? 0 : -1;
	case DNS_T_CNAME:
		if (dns_name_from_wire(rdata, len, rr->u.cname, &used) < 0)
			return -1;
		return used == len ? 0 : -1;
	case DNS_T_PTR:
		if (dns_name_from_wire(rdata, len, rr->u.ptr, &used) < 0)
			return -1;
		return used == len ? 0 : -1;
	case DNS_T_TXT:
		return txt_parse(rdata, len, rr, txtbuf, txtsize);
	case DNS_T_TLSA:
		if (len < 3)
			return -1;
		rr->u.tlsa.usage = rdata[0];
		rr->u.tlsa.selector = rdata[1];
		rr->u.tlsa.mtype = rdata[2];
		rr->u.tlsa.len = len - 3;
		rr->u.tlsa.data = rdata + 3;
		return 0;
	}
	return -1;
}
