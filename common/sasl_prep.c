/* sasl_prep.c — owns SASLprep (RFC 4013), the stringprep profile (RFC 3454) SCRAM applies to
 * the user name (a query string) and to the password its secret is made from (a stored
 * string), through GNU libidn's stringprep_profile ("SASLprep"): its tables are the RFC's
 * (Unicode 3.2), kept by Debian, and the library is small. Printable ASCII, what SASLprep
 * leaves as it is, never reaches the library, so the common password stays off its heap. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <stringprep.h>

#include "common/mailaddr.h"
#include "common/sasl.h"

static bool printable_ascii(const char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
			return false;
	return true;
}

int sasl_saslprep(const char *in, bool stored, char *out, size_t size)
{
	size_t n = strlen(in);
	char *prep = NULL;
	int rc;

	if (printable_ascii(in)) {
		if (n == 0 || n >= size)
			return -1;
		memcpy(out, in, n + 1);
		return 0;
	}
	if (!mailaddr_utf8_valid(in, n))
		return -1;
	rc = stringprep_profile(in, &prep, "SASLprep", stored ? STRINGPREP_NO_UNASSIGNED : 0);
	if (rc != STRINGPREP_OK) {
		free(prep);
		return -1;
	}
	n = strlen(prep);
	rc = n == 0 || n >= size ? -1 : 0;
	if (rc == 0)
		memcpy(out, prep, n + 1);
	explicit_bzero(prep, n);
	free(prep);
	return rc;
}

bool sasl_saslprep_ok(const char *in, bool stored)
{
	char out[SASL_PREP_MAX + 1];
	int rc = sasl_saslprep(in, stored, out, sizeof(out));

	explicit_bzero(out, sizeof(out));
	return rc == 0;
}
