/* usermodel.c — owns the per-user mailbox record and the selected-folder view with its
 * contradiction checks (imaptest-style state tracking). */
#include <stdlib.h>
#include <string.h>

#include "common/xmalloc.h"
#include "mailload/usermodel.h"

#define VIEW_MAX 1000000u /* messages in one view at most */

void um_view_init(struct um_view *v)
{
	memset(v, 0, sizeof(*v));
}

void um_view_release(struct um_view *v)
{
	free(v->uid);
	free(v->flags);
	free(v->want);
	um_view_init(v);
}

void um_view_begin(struct um_view *v, struct um_folder *f, bool grows)
{
	v->f = f;
	v->grows = grows;
	v->selected = false;
	v->exists = 0;
	v->expunges = 0;
	v->deleted = 0;
	v->uidvalidity = 0;
	v->uidnext = 0;
}

static int view_grow(struct um_view *v, uint32_t n)
{
	if (n <= v->cap)
		return 0;
	if (n > VIEW_MAX)
		return -1;
	uint32_t cap = v->cap ? v->cap : 64;
	while (cap < n)
		cap *= 2;
	v->uid = xreallocarray(v->uid, cap, sizeof(*v->uid));
	v->flags = xreallocarray(v->flags, cap, 1);
	v->want = xreallocarray(v->want, cap, 1);
	v->cap = cap;
	return 0;
}

const char *um_view_exists(struct um_view *v, uint32_t n)
{
	if (n < v->exists)
		return "EXISTS went down without EXPUNGE";
	if (view_grow(v, n) < 0)
		return "EXISTS beyond the view limit";
	for (uint32_t i = v->exists; i < n; i++) {
		v->uid[i] = 0;
		v->flags[i] = 0;
		v->want[i] = 0;
	}
	v->exists = n;
	return NULL;
}

const char *um_view_uidvalidity(struct um_view *v, uint32_t n)
{
	v->uidvalidity = n;
	if (v->f->uidvalidity != 0 && v->f->uidvalidity != n) {
		/* what was known belongs to the old UIDVALIDITY */
		memset(v->f->expunged, 0, sizeof(v->f->expunged));
		v->f->maxuid = 0;
		if (v->f->known)
			return "UIDVALIDITY changed";
	}
	return NULL;
}

const char *um_view_uidnext(struct um_view *v, uint32_t n)
{
	v->uidnext = n;
	if (v->f->known && n < v->f->uidnext)
		return "UIDNEXT went down";
	if (n <= v->f->maxuid)
		return "UIDNEXT not above a UID already seen";
	return NULL;
}

const char *um_view_expunge(struct um_view *v, uint32_t seq)
{
	if (seq == 0 || seq > v->exists)
		return "EXPUNGE of a sequence number beyond EXISTS";
	uint32_t i = seq - 1, rest = v->exists - seq;
	if ((v->want[i] & FL_DELETED) && v->uid[i] != 0) {
		v->f->expunged[1] = v->f->expunged[0];
		v->f->expunged[0] = v->uid[i];
	}
	memmove(v->uid + i, v->uid + i + 1, rest * sizeof(*v->uid));
	memmove(v->flags + i, v->flags + i + 1, rest);
	memmove(v->want + i, v->want + i + 1, rest);
	v->exists--;
	v->expunges++;
	return NULL;
}

const char *um_view_fetch(struct um_view *v, const struct imap_fetch *f)
{
	if (f->seq == 0 || f->seq > v->exists)
		return "FETCH of a sequence number beyond EXISTS";
	uint32_t i = (uint32_t)f->seq - 1;
	if (f->uid != 0) {
		if (f->uid > UINT32_MAX)
			return "UID out of range";
		uint32_t uid = (uint32_t)f->uid;
		if (v->uid[i] != 0 && v->uid[i] != uid)
			return "UID of a message changed";
		for (uint32_t j = i; j-- > 0;)
			if (v->uid[j] != 0) {
				if (v->uid[j] >= uid)
					return "UIDs not ascending with sequence numbers";
				break;
			}
		for (uint32_t j = i + 1; j < v->exists; j++)
			if (v->uid[j] != 0) {
				if (v->uid[j] <= uid)
					return "UIDs not ascending with sequence numbers";
				break;
			}
		if (v->uidnext != 0 && uid >= v->uidnext && !v->grows)
			return "UID at or above UIDNEXT in a folder nobody delivers to";
		for (int k = 0; k < 2; k++)
			if (v->f->known && v->f->expunged[k] == uid &&
			    (v->uidvalidity == 0 || v->uidvalidity == v->f->uidvalidity))
				return "an expunged UID came back";
		v->uid[i] = uid;
		if (uid > v->f->maxuid)
			v->f->maxuid = uid;
	}
	if (f->has_flags) {
		if ((f->flags & v->want[i]) != v->want[i])
			return "FLAGS lack a flag this client stored";
		v->flags[i] = (uint8_t)f->flags;
	}
	return NULL;
}

const char *um_view_selected(struct um_view *v)
{
	struct um_folder *f = v->f;

	v->selected = true;
	if (f->known && f->uidvalidity == v->uidvalidity) {
		if (!v->grows && v->exists != f->exists)
			return "message count changed in a folder only this client changes";
		if (v->grows && v->exists < f->exists)
			return "message count went down in a folder only this client expunges";
	}
	return NULL;
}

void um_view_want(struct um_view *v, uint32_t seq, uint8_t bits)
{
	if (seq == 0 || seq > v->exists)
		return;
	v->want[seq - 1] |= bits;
	if (bits & FL_DELETED)
		v->deleted++;
}

const char *um_view_expunged(struct um_view *v)
{
	const char *err = NULL;

	for (uint32_t i = 0; i < v->exists; i++)
		if (v->want[i] & FL_DELETED)
			err = "a message flagged \\Deleted survived EXPUNGE";
	if (err == NULL && v->expunges < v->deleted)
		err = "fewer EXPUNGE responses than messages deleted";
	v->expunges = 0;
	v->deleted = 0;
	return err;
}

void um_view_end(struct um_view *v)
{
	struct um_folder *f = v->f;

	if (f == NULL || !v->selected)
		return;
	f->uidvalidity = v->uidvalidity;
	if (v->uidnext > f->uidnext)
		f->uidnext = v->uidnext;
	f->exists = v->exists;
	f->known = v->uidvalidity != 0;
	v->f = NULL;
	v->selected = false;
}

uint32_t um_view_seq_of_uid(const struct um_view *v, uint32_t uid)
{
	for (uint32_t i = 0; i < v->exists; i++)
		if (v->uid[i] == uid)
			return i + 1;
	return 0;
}
