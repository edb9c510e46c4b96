/* version.h — the release and git revision every Heron program was built from: printed by
 * the daemons' -V and sent in imapd's ID response (RFC 2971). */
#ifndef HERON_VERSION_H
#define HERON_VERSION_H

/* The release, "0.1.0" (meson's project version). */
extern const char heron_version[];
/* `git describe` of the sources at build time, or "unknown" outside a checkout. */
extern const char heron_git_revision[];

#endif
