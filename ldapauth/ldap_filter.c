/* ldap_filter.c — owns LDAP filter templates: expansion of %s %u %d %% with every value
 * escaped per RFC 4515 (ldap_bv2escaped_filter_value), so no name can change a filter's shape. */
#include <string.h>

#include <ldap.h>

#include "common/buf.h"
#include "ldapauth/ldapauth_private.h"

#define FILTER_MAX 16384 /* a filter with every value escaped (RFC 4515) */

static int put_escaped(struct buf *b, const char *p, size_t len);

static int put_escaped(struct buf *b, const char *p, size_t len)
{
	struct berval in = { (ber_len_t)len, (char *)(uintptr_t)p };
	struct berval out = { 0, NULL };
	int rc;

	if (ldap_bv2escaped_filter_value(&in, &out) != 0)
		return -1;
	rc = buf_append(b, out.bv_val, out.bv_len);
	ber_memfree(out.bv_val);
	return rc;
}

bool ldapauth_filter_valid(const char *tmpl)
{
	for (const char *p = tmpl; *p != '\0'; p++) {
		if (*p != '%')
			continue;
		p++;
		if (*p != 's' && *p != 'u' && *p != 'd' && *p != '%')
			return false;
	}
	return true;
}

char *ldapauth_filter_expand(const char *tmpl, const char *name)
{
	const char *at = strrchr(name, '@');
	size_t nlen = strlen(name);
	size_t ulen = at != NULL ? (size_t)(at - name) : nlen;
	const char *dom = at != NULL ? at + 1 : "";
	struct buf b;
	int rc = 0;

	if (!ldapauth_filter_valid(tmpl))
		return NULL;
	buf_init(&b, 128, FILTER_MAX);
	for (const char *p = tmpl; *p != '\0' && rc == 0; p++) {
		if (*p != '%') {
			rc = buf_putc(&b, *p);
			continue;
		}
		switch (*++p) {
		case 's':
			rc = put_escaped(&b, name, nlen);
			break;
		case 'u':
			rc = put_escaped(&b, name, ulen);
			break;
		case 'd':
			rc = put_escaped(&b, dom, strlen(dom));
			break;
		default:
			rc = buf_putc(&b, '%');
			break;
		}
	}
	if (rc != 0) {
		buf_release(&b);
		return NULL;
	}
	return buf_steal(&b, NULL);
}
