/* imap_view_set.c — owns the resolution of a sequence set against a view: sequence numbers
 * and UIDs to the view's UIDs, for commands (strict: past EXISTS is an error) and for SEARCH
 * keys (lenient: past EXISTS matches nothing), and the saved result "$". A view alone: no
 * session is needed (mailctl search uses it too). */
#include "imapd/imap_seqset.h"
#include "imapd/imapd.h"

int imap_view_set_resolve_key(const struct imap_view *v, const char *s, size_t len,
			      struct imap_seqset *uids_r)
{
	struct imap_seqset seqs = { 0 };

	if (imap_seqset_parse(&seqs, s, len, IMAP_SEQSET_RANGES_MAX) < 0) {
		imap_seqset_release(&seqs);
		return -1;
	}
	imap_seqset_resolve(&seqs, (uint32_t)v->n);
	imap_seqset_clear(uids_r);
	for (size_t i = 0; i < seqs.n; i++) {
		uint32_t lo = seqs.v[i].lo, hi = seqs.v[i].hi;

		if (lo == 0 || lo > v->n)
			continue; /* past EXISTS (or '*' of an empty mailbox): nothing */
		if (hi > v->n)
			hi = (uint32_t)v->n;
		imap_seqset_add(uids_r, v->msgs[lo - 1].uid, v->msgs[hi - 1].uid);
	}
	imap_seqset_resolve(uids_r, 0);
	imap_seqset_release(&seqs);
	return 0;
}

int imap_view_set_resolve(const struct imap_view *v, const char *s, size_t len, bool uid,
			  struct imap_seqset *uids_r, const char **why_r)
{
	struct imap_seqset seqs = { 0 };

	if (len == 1 && s[0] == '$') {
		/* SEARCHRES (RFC 5182): the last saved result, as UIDs, in either form */
		imap_seqset_clear(uids_r);
		for (size_t i = 0; i < v->saved.n; i++)
			imap_seqset_add(uids_r, v->saved.v[i].lo, v->saved.v[i].hi);
		imap_seqset_resolve(uids_r, 0);
		return 0;
	}
	if (imap_seqset_parse(uid ? uids_r : &seqs, s, len, IMAP_SEQSET_RANGES_MAX) < 0) {
		imap_seqset_release(&seqs);
		*why_r = "Invalid sequence set";
		return -1;
	}
	if (uid) {
		imap_seqset_resolve(uids_r, v->n > 0 ? v->msgs[v->n - 1].uid : 0);
		return 0;
	}
	imap_seqset_resolve(&seqs, (uint32_t)v->n);
	if (v->n == 0 || imap_seqset_max(&seqs) > v->n || seqs.v[0].lo == 0) {
		imap_seqset_release(&seqs);
		*why_r = v->n == 0 ? "No messages" : "Invalid sequence number";
		return -1;
	}
	imap_seqset_clear(uids_r);
	for (size_t i = 0; i < seqs.n; i++)
		imap_seqset_add(uids_r, v->msgs[seqs.v[i].lo - 1].uid,
				v->msgs[seqs.v[i].hi - 1].uid);
	imap_seqset_resolve(uids_r, 0);
	imap_seqset_release(&seqs);
	return 0;
}
