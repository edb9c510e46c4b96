/* fuzz_ldap_filter.c — libFuzzer target: ldapauth's RFC 4515 filter templates. The input is a
 * template and a name (split at the first NUL, or the first byte's value as the cut). Whatever
 * the name holds, the expanded filter has exactly the parentheses and '*' of the template
 * expanded with a harmless name, no NUL, and every '\' starts a two-hex-digit escape that the
 * template did not write itself. Also the password-scheme verifier over the same split. Built
 * only with -Dfuzz=true (clang). */
#include <assert.h>
#include <ctype.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ldapauth/ldapauth_private.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void count_shape(const char *f, size_t n[3])
{
	n[0] = n[1] = n[2] = 0;
	for (; *f != '\0'; f++) {
		if (*f == '(')
			n[0]++;
		else if (*f == ')')
			n[1]++;
		else if (*f == '*')
			n[2]++;
	}
}

/* Backslashes the template wrote itself (outside %x escapes). */
static size_t template_backslashes(const char *t)
{
	size_t n = 0;

	for (; *t != '\0'; t++) {
		if (*t == '%' && t[1] != '\0')
			t++;
		else if (*t == '\\')
			n++;
	}
	return n;
}

static void check(const char *tmpl, const char *name)
{
	char *got = ldapauth_filter_expand(tmpl, name);
	char *ref = ldapauth_filter_expand(tmpl, "x");
	size_t a[3], b[3], bad = 0;

	assert((ref != NULL) == ldapauth_filter_valid(tmpl));
	/* got may also be NULL when the escaped name makes it longer than the ceiling. */
	assert(ref != NULL || got == NULL);
	if (got == NULL) {
		free(ref);
		return;
	}
	count_shape(got, a);
	count_shape(ref, b);
	assert(memcmp(a, b, sizeof(a)) == 0);
	for (const char *p = got; *p != '\0'; p++)
		if (*p == '\\' &&
		    !(isxdigit((unsigned char)p[1]) && isxdigit((unsigned char)p[2])))
			bad++;
	assert(bad <= template_backslashes(tmpl));
	free(got);
	free(ref);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, '\0', size);
	size_t cut = nul != NULL ? (size_t)(nul - data) : (size > 0 ? data[0] % (size + 1) : 0);
	char *a = strndup((const char *)data, cut);
	char *b = strndup((const char *)data + (cut < size ? cut + 1 : size),
			  cut < size ? size - cut - 1 : 0);

	if (strlen(a) <= 1024 && strlen(b) <= 1024) {
		check(a, b);
		check("(&(objectClass=inetOrgPerson)(|(uid=%u)(mail=%s)))", b);
		check("(mail=%s)", a);
	}
	(void)ldapauth_passwd_verify(a, strlen(a), b);
	free(a);
	free(b);
	return 0;
}
