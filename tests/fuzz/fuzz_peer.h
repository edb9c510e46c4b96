/* fuzz_peer.h — shared by the session fuzz targets: a private temp dir, listeners, an
 * in-process client that writes the input and half-closes, a bounded event loop until the
 * server side is done, and the store reset between inputs. */
#ifndef HERON_FUZZ_PEER_H
#define HERON_FUZZ_PEER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>

struct conf;
struct net_fds;
struct sockaddr_un;
struct store;
struct store_gc;

/* ASan's defaults for the session targets (their __asan_default_options; ASAN_OPTIONS
   overrides them): a quarantine of 32 MB, not 256. LeakSanitizer's scan walks every chunk,
   the quarantined ones too, so it took about three times as long with 256 MB, and the
   larger working set cost page faults in every input. An input of these targets allocates
   about 100 KB, a few MB at most (fuzz_leak_end counts them: FUZZ_LEAK_STATS), so 32 MB
   still holds everything one input freed until it ends: a use after free that replays from
   its input alone is caught as before. */
#define FUZZ_SESSION_ASAN_OPTIONS "quarantine_size_mb=32"

/* Aborts with what and strerror(errno) unless ok. */
void fuzz_must(int ok, const char *what);
/* conf_set or abort. */
void fuzz_set(struct conf *c, const char *sec, const char *key, const char *val);
/* Makes a private dir (on /dev/shm when writable, fsync is cheap there) into dir. */
void fuzz_tmpdir(char *dir, size_t size, const char *name);
/* Logging (debug when FUZZ_LOG is set, else errors only), the private dir and a users file in
   it (path_r), removed when the process exits: alice (alice@heron.test, al@heron.test) and bob (bob@heron.test), password
   "pw". */
void fuzz_start(char *dir, size_t size, const char *name, char *path_r, size_t path_size);
/* Puts the store of a fixture reused across inputs back to empty: deletes every user (with
   mailboxes, messages, subscriptions) and every queue entry, so that one input's writes are
   not seen by the next (user ids and UIDVALIDITYs still advance). */
void fuzz_store_reset(struct store *st);
/* The per-input leak check (fuzz_peer.c): fuzz_leak_init in LLVMFuzzerInitialize before
   any thread is made (FUZZ_LEAK_CHECK=0 leaves it off); fuzz_leak_begin when an input starts
   and fuzz_leak_end (flushing gc, or NULL) when everything of it should be freed: aborts,
   after LeakSanitizer's report, when blocks the input allocated were lost. */
void fuzz_leak_init(void);
void fuzz_leak_begin(void);
void fuzz_leak_end(struct store_gc *gc);
/* Removes a directory tree. */
void fuzz_rm_rf(const char *path);
/* Appends to fds a listener for the servers (net_server_new): an AF_UNIX stream socket in the
   abstract namespace named after the process and name, its address in *addr_r for
   fuzz_session. A connection accepted on it is seen by the server as coming from the IPv4
   address fuzz_session chose (see accept4 in fuzz_peer.c). */
void fuzz_listen(const char *name, struct net_fds *fds, struct sockaddr_un *addr_r);
/* Connects to the listener at to, as the next address of 127/8 (a new one for each input),
   sends data[0..size), half-closes once the server is idle (no event to run, no byte coming,
   nothing in flight in gc, its group committer, or NULL; see fuzz_peer.c) and reads until
   the server closes, running base; returns once the peer saw EOF and done(arg) is true, or
   aborts after timeout_ms (a session that does not end is a bug). No clock is waited on. */
void fuzz_session(struct event_base *base, const struct sockaddr_un *to, const uint8_t *data,
		  size_t size, bool (*done)(void *arg), void *arg, struct store_gc *gc,
		  int64_t timeout_ms);

#endif
