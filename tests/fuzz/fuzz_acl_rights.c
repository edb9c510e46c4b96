/* fuzz_acl_rights.c — libFuzzer target: the ACL rights and identifier checks of RFC 4314
 * (store/store_acl.c) that SETACL, LISTRIGHTS and `mailctl acl set` put client bytes through.
 * The input's first byte splits it: a rights argument (store_acl_parse_change) and an
 * identifier (store_acl_id_valid). Rights taken are known rights only; their text
 * (store_acl_format) fits STORE_ACL_TEXT_MAX, holds only right letters, and parses back to
 * the same rights; "+" and "-" change what a row holds as set union and difference; a valid
 * identifier is 1..STORE_ACL_ID_MAX bytes without control bytes, a lone "-" never. Built
 * only with -Dfuzz=true (clang). */
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "store/store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char text[STORE_ACL_TEXT_MAX];
	size_t split, n;
	uint32_t rights, back, had;
	char mod;

	if (size == 0)
		return 0;
	split = data[0] < size ? data[0] : size - 1;
	const char *r = (const char *)data + 1, *id = r + split;
	size_t rlen = split, idlen = size - 1 - split;

	if (store_acl_parse_change(r, rlen, &mod, &rights) == 0) {
		assert(mod == 0 || mod == '+' || mod == '-');
		assert((rights & ~(uint32_t)STORE_ACL_ALL) == 0);
		n = store_acl_format(rights, text);
		assert(n < STORE_ACL_TEXT_MAX && strlen(text) == n);
		for (size_t i = 0; i < n; i++)
			assert(strchr(STORE_ACL_RIGHTS "cd", text[i]) != NULL);
		assert(store_acl_parse(text, n, &back) == 0 && back == rights);
		had = rlen > 0 ? (uint32_t)data[size - 1] * 9u & STORE_ACL_ALL : 0;
		if (mod == '+')
			assert(store_acl_apply(had, mod, rights) == (had | rights));
		else if (mod == '-')
			assert(store_acl_apply(had, mod, rights) == (had & ~rights));
		else
			assert(store_acl_apply(had, mod, rights) == rights);
	}
	if (store_acl_id_valid(id, idlen)) {
		assert(idlen >= 1 && idlen <= STORE_ACL_ID_MAX);
		assert(!(idlen == 1 && id[0] == '-'));
		for (size_t i = id[0] == '-' ? 1 : 0; i < idlen; i++)
			assert((unsigned char)id[i] > 0x20 && (unsigned char)id[i] != 0x7f);
	}
	return 0;
}
