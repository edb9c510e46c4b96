/* conf_keys.c — the one table of every heron.conf key: section, name, type, bounds, default
 * and a line of documentation. etc/heron.conf documents each row with the same default; a unit
 * test (tests/common/test_conf.c) checks that it does. Add a key here first. */
#include <stdint.h>

#include "common/conf.h"

#define K(n) ((int64_t)(n))
#define KiB (K(1) << 10)
#define MiB (K(1) << 20)
#define GiB (K(1) << 30)
#define SEC K(1000)
#define MIN (60 * SEC)
#define HOUR (60 * MIN)
#define DAY (24 * HOUR)

/* The rows of CONF_PROXY_FIELDS in section sec (a name: [imapd], [sieve]): the same names,
   types, bounds and defaults but the store hosts' port (port_default); each section's
   documentation. scripts/gen-conf-man expands it as the compiler does. */
#define CONF_PROXY_KEYS(sec, port_default, doc_proxy, doc_hosts, doc_port, doc_user, doc_secret,                \
			doc_trusted, doc_timeout)                                                               \
	{ #sec, "proxy", CONF_BOOL, 0, 0, "no", NULL, doc_proxy, CONF_AT(sec.proxy) },                          \
		{ #sec,      "proxy_hosts",           CONF_LIST, 0, 0, "", NULL,                                \
		  doc_hosts, CONF_AT(sec.proxy_hosts) },                                                        \
		{ #sec,     "proxy_port",           CONF_INT, 1, 65535, port_default, NULL,                     \
		  doc_port, CONF_AT(sec.proxy_port) },                                                          \
		{ #sec,     "proxy_user",           CONF_STR, 0, 0, "heron-proxy", NULL,                        \
		  doc_user, CONF_AT(sec.proxy_user) },                                                          \
		{ #sec,       "proxy_secret_file",           CONF_STR, 0, 0, "", NULL,                          \
		  doc_secret, CONF_AT(sec.proxy_secret_file) },                                                 \
		{ #sec,        "proxy_trusted",           CONF_CIDRS, 0, 0, "", NULL,                           \
		  doc_trusted, CONF_AT(sec.proxy_trusted) },                                                    \
		{ #sec,    "proxy_timeout", CONF_DURATION,                                                      \
		  1 * SEC, 5 * MIN,         "10s",                                                              \
		  NULL,    doc_timeout,     CONF_AT(sec.proxy_timeout_ms) },                                    \
		{ #sec,                                                                                         \
		  "proxy_tls",                                                                                  \
		  CONF_ENUM,                                                                                    \
		  0,                                                                                            \
		  0,                                                                                            \
		  "starttls",                                                                                   \
		  "none|starttls",                                                                              \
		  "front: TLS on the connection to a store host before the proxy login: starttls "              \
		  "(STARTTLS, the certificate verified against proxy_ca_file and the store host's "             \
		  "name, the mailHost; a store host that does not offer it, a failed handshake or "             \
		  "verification fails the login as an unreachable store host would) or none (the "              \
		  "secret and the session in clear: only on a network no one else can read)",                   \
		  CONF_AT(sec.proxy_tls) },                                                                     \
		{ #sec,                                                                                         \
		  "proxy_ca_file",                                                                              \
		  CONF_STR,                                                                                     \
		  0,                                                                                            \
		  0,                                                                                            \
		  "",                                                                                           \
		  NULL,                                                                                         \
		  "front: PEM file of the CA certificates a store host's certificate must "                     \
		  "chain to with proxy_tls = starttls (empty: the system's CAs); read at the "                  \
		  "start and at each SIGHUP, not per login (a file replaced under the same "                    \
		  "name is read at the next SIGHUP, and the TLS sessions kept from the "                        \
		  "store hosts are dropped then)",                                                              \
		  CONF_AT(sec.proxy_ca_file) },                                                                 \
		{ #sec,                                                                                         \
		  "proxy_cert_file",                                                                            \
		  CONF_STR,                                                                                     \
		  0,                                                                                            \
		  0,                                                                                            \
		  "",                                                                                           \
		  NULL,                                                                                         \
		  "front: PEM file of the front's TLS client certificate (its chain after it) for the "         \
		  "store hosts; with proxy_key_file and proxy_tls = starttls the proxy login is SASL "          \
		  "EXTERNAL (RFC 4422 appendix A) with the user as the authorization identity, and no "         \
		  "secret is sent (empty: the shared secret of proxy_secret_file)",                             \
		  CONF_AT(sec.proxy_cert_file) },                                                               \
		{ #sec,                                                                                         \
		  "proxy_key_file",                                                                             \
		  CONF_STR,                                                                                     \
		  0,                                                                                            \
		  0,                                                                                            \
		  "",                                                                                           \
		  NULL,                                                                                         \
		  "front: PEM file of proxy_cert_file's private key",                                           \
		  CONF_AT(sec.proxy_key_file) },                                                                \
		{ #sec,                                                                                         \
		  "proxy_client_ca_file",                                                                       \
		  CONF_STR,                                                                                     \
		  0,                                                                                            \
		  0,                                                                                            \
		  "",                                                                                           \
		  NULL,                                                                                         \
		  "store host: PEM file of the CA certificates a front's TLS client certificate must "          \
		  "chain to (a CA for the fronts only: any certificate it signed is a front's); a "             \
		  "proxy_trusted client's STARTTLS asks for one, and AUTHENTICATE EXTERNAL with one that "      \
		  "verifies logs in as its authorization identity (empty: EXTERNAL is refused); read at "       \
		  "the start and at each SIGHUP",                                                               \
		  CONF_AT(sec.proxy_client_ca_file) },                                                          \
	{                                                                                                       \
#sec, "proxy_require_tls", CONF_BOOL, 0, 0, "no", NULL,                                         \
			"store host: a proxy login (the shared secret or EXTERNAL) only over TLS: yes refuses " \
			"the shared secret sent in clear, even from a proxy_trusted address",                   \
			CONF_AT(sec.proxy_require_tls)                                                          \
	}

const struct conf_key conf_keys[] = {
	/* section    name                  type          min   max        default  choices doc */
	{ "store", "path", CONF_STR, 0, 0, "/var/lib/heron/store", NULL,
	  "directory of the message store (partN/ below it)", CONF_AT(store.path) },
	{ "store", "partitions", CONF_INT, 1, 1024, "4", NULL,
	  "number of partitions (LMDB environments); fixed once users exist",
	  CONF_AT(store.partitions) },
	{ "store", "map_size", CONF_SIZE, 1 * MiB, K(1) << 40, "1G", NULL,
	  "initial LMDB map size per partition; grows automatically when full",
	  CONF_AT(store.map_size) },
	{ "store", "map_size_max", CONF_SIZE, 1 * MiB, K(1) << 44, "256G", NULL,
	  "the map size a partition may grow to", CONF_AT(store.map_size_max) },
	{ "store", "expunge_history", CONF_DURATION, 0, 3650 * DAY, "30d", NULL,
	  "how long expunged UIDs are remembered for QRESYNC VANISHED",
	  CONF_AT(store.expunge_history_ms) },
	{ "store", "expunge_history_max", CONF_INT, 1, 100000000, "100000", NULL,
	  "expunged UIDs remembered per mailbox at most: the oldest go first, as if past "
	  "expunge_history",
	  CONF_AT(store.expunge_history_max) },
	{ "store", "group_commit_delay", CONF_DURATION, 0, 1000, "2ms", NULL,
	  "how long a commit waits for more deliveries/flag changes to share it (not when the "
	  "previous commit held a single one: a lone writer commits at once)",
	  CONF_AT(store.group_commit_delay_ms) },
	{ "store", "group_commit_max", CONF_INT, 1, 100000, "256", NULL,
	  "operations that make a group commit flush at once", CONF_AT(store.group_commit_max) },
	{ "store", "group_commit_syncfs", CONF_BOOL, 0, 0, "no", NULL,
	  "a group commit of 2 or more new message files makes them durable with one syncfs "
	  "of the store's filesystem instead of a fsync each: for a store on a filesystem of "
	  "its own (syncfs also waits for every other file's unwritten data there)",
	  CONF_AT(store.group_commit_syncfs) },
	{ "store", "fsync_flags", CONF_BOOL, 0, 0, "no", NULL,
	  "yes: a flag change (STORE, FETCH's implicit \\Seen, the \\Recent claim) is answered "
	  "only once the index is synced, like a delivery; no: once it is committed, a sync "
	  "later (the answer waits for no disk flush): a killed process loses nothing, a machine crash can lose "
	  "the flag changes answered during the last index sync (milliseconds), never a "
	  "message, never a damaged index",
	  CONF_AT(store.fsync_flags) },
	{ "store", "fts", CONF_BOOL, 0, 0, "yes", NULL,
	  "keep a full-text index of every mailbox (trigrams of the decoded text of each "
	  "message, written with its delivery or append) so SEARCH BODY/TEXT reads only the "
	  "messages that may match; `mailctl fts rebuild` indexes mailboxes from before",
	  CONF_AT(store.fts) },
	{ "store", "inline_max", CONF_SIZE, 0, 1 * MiB, "16K", NULL,
	  "a message body of up to this many bytes is kept in the index itself (zstd-compressed "
	  "when that is smaller), committed with its message record: no file and no fsync of "
	  "its own; larger ones are files; 0: every body a file (the format-2 layout)",
	  CONF_AT(store.inline_max) },
	{ "store", "tombstone_age", CONF_DURATION, 1000, 3650 * DAY, "7d", NULL,
	  "how long the tombstone `mailctl user move --finish` leaves for a user moved away "
	  "holds the name: until then a delivery to the user here gets 451 4.2.0 and a login "
	  "a referral to the new host, and no account is made here on first mail or login",
	  CONF_AT(store.tombstone_age_ms) },

	{ "directory", "backend", CONF_ENUM, 0, 0, "ldap", "ldap|file",
	  "where users live: an LDAP directory or a users file", CONF_AT(directory.backend) },
	{ "directory", "uri", CONF_STR, 0, 0, "ldap://127.0.0.1/", NULL,
	  "LDAP URIs (ldap://, ldaps://), space separated", CONF_AT(directory.uri) },
	{ "directory", "base", CONF_STR, 0, 0, "ou=people,dc=heron,dc=test", NULL,
	  "search base for users", CONF_AT(directory.base) },
	{ "directory", "scope", CONF_ENUM, 0, 0, "sub", "sub|one|base", "search scope",
	  CONF_AT(directory.scope) },
	{ "directory", "bind_dn", CONF_STR, 0, 0, "", NULL,
	  "service account DN for searches (empty: anonymous)", CONF_AT(directory.bind_dn) },
	{ "directory", "bind_password_file", CONF_STR, 0, 0, "", NULL,
	  "file holding the service account's password", CONF_AT(directory.bind_password_file) },
	{ "directory", "starttls", CONF_BOOL, 0, 0, "no", NULL,
	  "use StartTLS on ldap:// connections (certificate checked against [tls] ca)",
	  CONF_AT(directory.starttls) },
	{ "directory", "auth_mode", CONF_ENUM, 0, 0, "bind", "bind|lookup",
	  "bind: bind as the user; lookup: read the hash and verify it locally",
	  CONF_AT(directory.auth_mode) },
	{ "directory", "scram", CONF_BOOL, 0, 0, "no", NULL,
	  "offer SCRAM-SHA-256[-PLUS]: every user has a {SCRAM-SHA-256} secret (users file or lookup)",
	  CONF_AT(directory.scram) },
	{ "directory", "user_filter", CONF_STR, 0, 0, "(&(objectClass=inetOrgPerson)(uid=%u))",
	  NULL, "filter for a login name (%u user, %d domain, %s whole name)",
	  CONF_AT(directory.user_filter) },
	{ "directory", "address_filter", CONF_STR, 0, 0,
	  "(&(objectClass=inetOrgPerson)(|(mail=%s)(mailLocalAddress=%s)(mailAlternateAddress=%s)))",
	  NULL, "filter for a recipient address (%s address, %u local part, %d domain)",
	  CONF_AT(directory.address_filter) },
	{ "directory", "login_attribute", CONF_STR, 0, 0, "uid", NULL,
	  "attribute holding the login name", CONF_AT(directory.login_attribute) },
	{ "directory", "address_attribute", CONF_STR, 0, 0, "mail", NULL,
	  "attribute holding the primary address (more values are aliases)",
	  CONF_AT(directory.address_attribute) },
	{ "directory", "alias_attributes", CONF_LIST, 0, 0,
	  "mailLocalAddress,mailAlternateAddress", NULL, "attributes holding alias addresses",
	  CONF_AT(directory.alias_attributes) },
	{ "directory", "mailhost_attribute", CONF_STR, 0, 0, "mailHost", NULL,
	  "attribute holding the user's home host (empty: not read)",
	  CONF_AT(directory.mailhost_attribute) },
	{ "directory", "partition_attribute", CONF_STR, 0, 0, "heronMailPartition", NULL,
	  "attribute holding the store partition (empty: not read)",
	  CONF_AT(directory.partition_attribute) },
	{ "directory", "quota_attribute", CONF_STR, 0, 0, "mailQuota", NULL,
	  "attribute holding the quota in bytes (empty: not read)",
	  CONF_AT(directory.quota_attribute) },
	{ "directory", "password_attribute", CONF_STR, 0, 0, "userPassword", NULL,
	  "attribute holding the password hash (auth_mode = lookup)",
	  CONF_AT(directory.password_attribute) },
	{ "directory", "users_file", CONF_STR, 0, 0, "/etc/heron/users", NULL,
	  "users file for backend = file (name:{SCHEME}hash:address,aliases:quota)",
	  CONF_AT(directory.users_file) },
	{ "directory", "password_scheme", CONF_ENUM, 0, 0, "auto",
	  "auto|SSHA|SSHA256|SSHA512|CRYPT|ARGON2|SCRAM-SHA-256",
	  "the hash mailctl pw and user add --password make; auto: SSHA512 for the users file, "
	  "SSHA for LDAP (what a stock slapd checks; SSHA512 needs its pw-sha2 module, ARGON2 "
	  "its argon2 module)",
	  CONF_AT(directory.password_scheme) },
	{ "directory", "pool_size", CONF_INT, 1, 64, "4", NULL, "LDAP connections per process",
	  CONF_AT(directory.pool_size) },
	{ "directory", "bind_pool_size", CONF_INT, 1, 256, "16", NULL,
	  "LDAP connections per process for user binds (auth_mode = bind; a bind holds one)",
	  CONF_AT(directory.bind_pool_size) },
	{ "directory", "timeout", CONF_DURATION, 100, 5 * MIN, "5s", NULL,
	  "per-operation LDAP timeout", CONF_AT(directory.timeout_ms) },
	{ "directory", "auth_cache_size", CONF_INT, 0, 100000000, "500000", NULL,
	  "entries in the authentication/lookup cache (0 disables it): the workers of each "
	  "daemon (imapd, mtad, managesieved) share one cache of this many (512-byte slots, "
	  "allocated as they are first used)",
	  CONF_AT(directory.auth_cache_size) },
	{ "directory", "auth_cache_ttl", CONF_DURATION, 0, 30 * DAY, "2h", NULL,
	  "how long a positive result is cached", CONF_AT(directory.auth_cache_ttl_ms) },
	{ "directory", "negative_cache_ttl", CONF_DURATION, 0, 30 * DAY, "5m", NULL,
	  "how long a negative result (no such user) is cached",
	  CONF_AT(directory.negative_cache_ttl_ms) },
	{ "directory", "negative_cache_memory", CONF_SIZE, 64 * KiB, 1 * GiB, "8M", NULL,
	  "memory the negative results of one daemon (all of its workers) may hold "
	  "(unknown addresses tried: the oldest go first), within auth_cache_size entries",
	  CONF_AT(directory.negative_cache_memory) },
	{ "directory", "login_throttle_file", CONF_STR, 0, 0, "", NULL,
	  "file mtad and imapd share to count failed logins per address and user (empty: "
	  "login-throttle in the [store] path)",
	  CONF_AT(directory.login_throttle_file) },
	{ "directory", "login_throttle_slots", CONF_INT, 1024, 16777216, "65536", NULL,
	  "entries of the login throttle: (address, user) pairs, users and addresses with "
	  "recent logins",
	  CONF_AT(directory.login_throttle_slots) },

	{ "tls", "cert", CONF_STR, 0, 0, "", NULL,
	  "PEM certificate chain for the servers (empty: no TLS offered)", CONF_AT(tls.cert) },
	{ "tls", "key", CONF_STR, 0, 0, "", NULL, "PEM private key for cert", CONF_AT(tls.key) },
	{ "tls", "ca", CONF_STR, 0, 0, "", NULL,
	  "PEM CA bundle to verify peers (LDAP, relays); empty: the system's", CONF_AT(tls.ca) },
	{ "tls", "min_version", CONF_ENUM, 0, 0, "TLSv1.2", "TLSv1.2|TLSv1.3",
	  "lowest TLS version accepted", CONF_AT(tls.min_version) },
	{ "tls", "ciphers", CONF_STR, 0, 0, "", NULL,
	  "OpenSSL cipher list for TLS 1.2 (empty: OpenSSL's default)", CONF_AT(tls.ciphers) },

	{ "mtad", "listen", CONF_ADDRS, 0, 0, "*:25", NULL, "SMTP (MX) listeners",
	  CONF_AT(mtad.listen) },
	{ "mtad", "submission", CONF_ADDRS, 0, 0, "*:587", NULL,
	  "submission listeners (AUTH required)", CONF_AT(mtad.submission) },
	{ "mtad", "submissions", CONF_ADDRS, 0, 0, "", NULL,
	  "implicit-TLS submission listeners, e.g. *:465 (needs [tls] cert)",
	  CONF_AT(mtad.submissions) },
	{ "mtad", "lmtp", CONF_ADDRS, 0, 0, "", NULL,
	  "LMTP listeners: host:port or /path/to/socket", CONF_AT(mtad.lmtp) },
	{ "mtad", "hostname", CONF_STR, 0, 0, "", NULL,
	  "name in the greeting and Received: (empty: the host name)", CONF_AT(mtad.hostname) },
	{ "mtad", "workers", CONF_INT, 1, 256, "2", NULL, "worker processes",
	  CONF_AT(mtad.workers) },
	{ "mtad", "user", CONF_STR, 0, 0, "heron", NULL,
	  "user the master and workers run as when started as root (the master once its "
	  "listeners are bound; the package makes heron); empty: keep root, only with allow_root",
	  CONF_AT(mtad.user) },
	{ "mtad", "allow_root", CONF_BOOL, 0, 0, "no", NULL,
	  "run as root when started as root with user empty (else mtad refuses to start)",
	  CONF_AT(mtad.allow_root) },
	{ "mtad", "pidfile", CONF_STR, 0, 0, "", NULL, "pid file of the master (empty: none)",
	  CONF_AT(mtad.pidfile) },
	{ "mtad", "max_connections", CONF_INT, 1, 1000000, "10000", NULL,
	  "concurrent SMTP connections of all workers (more are answered 421 and closed)",
	  CONF_AT(mtad.max_connections) },
	{ "mtad", "max_connections_per_ip", CONF_INT, 1, 1000000, "100", NULL,
	  "concurrent connections from one client address, all workers (more get 421)",
	  CONF_AT(mtad.max_connections_per_ip) },
	{ "mtad", "max_unauth_connections_per_ip", CONF_INT, 1, 1000000, "50", NULL,
	  "sessions from one client address not authenticated yet, all workers: submission "
	  "connections, and port 25 sessions once they start AUTH (more get 421 / 454)",
	  CONF_AT(mtad.max_unauth_connections_per_ip) },
	{ "mtad", "local_domains", CONF_LIST, 0, 0, "", NULL,
	  "domains whose mail is delivered into the store", CONF_AT(mtad.local_domains) },
	{ "mtad", "trusted_networks", CONF_CIDRS, 0, 0, "", NULL,
	  "clients that may relay without AUTH (empty: none, not even loopback)",
	  CONF_AT(mtad.trusted_networks) },
	{ "mtad", "relay_host", CONF_STR, 0, 0, "", NULL,
	  "host:port that takes all remote mail not in transport_map ([host]: no MX lookup; empty: "
	  "each domain's MX hosts through DNS)",
	  CONF_AT(mtad.relay_host) },
	{ "mtad", "transport_map", CONF_LIST, 0, 0, "", NULL,
	  "domain=host:port entries for remote mail, checked before relay_host ([host]: its "
	  "addresses; host: its MX records; an address as is)",
	  CONF_AT(mtad.transport_map) },
	{ "mtad", "mailhost", CONF_STR, 0, 0, "", NULL,
	  "this host's name in users' mailHost: mail for a user whose mailHost names another "
	  "host is queued and delivered over LMTP to that store host (empty: hostname, else the "
	  "host name)",
	  CONF_AT(mtad.mailhost) },
	{ "mtad", "mailhost_lmtp", CONF_LIST, 0, 0, "", NULL,
	  "HOST=[address]:port entries: where the LMTP listener of store host HOST (a mailHost "
	  "value) is; a mailHost not listed is reached at its name on mailhost_lmtp_port",
	  CONF_AT(mtad.mailhost_lmtp) },
	{ "mtad", "mailhost_lmtp_port", CONF_INT, 1, 65535, "24", NULL,
	  "TCP port of the LMTP listeners of store hosts not in mailhost_lmtp",
	  CONF_AT(mtad.mailhost_lmtp_port) },
	{ "mtad", "max_message_size", CONF_SIZE, 1 * KiB, 2 * GiB, "50M", NULL,
	  "largest message accepted (SIZE)", CONF_AT(mtad.max_message_size) },
	{ "mtad", "line_max", CONF_SIZE, 512, 1 * MiB, "4k", NULL,
	  "longest command or header line accepted", CONF_AT(mtad.line_max) },
	{ "mtad", "max_recipients_per_transaction", CONF_INT, 1, 100000, "1500", NULL,
	  "recipients accepted per message; more get 452 4.5.3",
	  CONF_AT(mtad.max_recipients_per_transaction) },
	{ "mtad", "reject_recipients_per_transaction", CONF_INT, 1, 100000, "2500", NULL,
	  "above this many RCPT attempts the whole transaction is refused",
	  CONF_AT(mtad.reject_recipients_per_transaction) },
	{ "mtad", "max_transactions_per_session", CONF_INT, 1, 1000000, "1500", NULL,
	  "messages per connection", CONF_AT(mtad.max_transactions_per_session) },
	{ "mtad", "max_errors", CONF_INT, 1, 1000, "10", NULL,
	  "protocol errors before 421 and disconnect", CONF_AT(mtad.max_errors) },
	{ "mtad", "greeting_delay", CONF_DURATION, 0, 5 * MIN, "0s", NULL,
	  "pause before the greeting (talkers-first are refused)",
	  CONF_AT(mtad.greeting_delay_ms) },
	{ "mtad", "command_timeout", CONF_DURATION, 1 * SEC, 1 * HOUR, "5m", NULL,
	  "idle time allowed between commands", CONF_AT(mtad.command_timeout_ms) },
	{ "mtad", "data_timeout", CONF_DURATION, 1 * SEC, 1 * HOUR, "10m", NULL,
	  "idle time allowed inside DATA/BDAT", CONF_AT(mtad.data_timeout_ms) },
	{ "mtad", "login_timeout", CONF_DURATION, 1 * SEC, 1 * HOUR, "60s", NULL,
	  "time a submission connection may take to authenticate, from its connect (whatever it "
	  "sends meanwhile)",
	  CONF_AT(mtad.login_timeout_ms) },
	{ "mtad", "max_transaction_time", CONF_DURATION, 1 * SEC, 1 * DAY, "1h", NULL,
	  "time one message may take from MAIL to the end of its data, however busy the client",
	  CONF_AT(mtad.max_transaction_time_ms) },
	{ "mtad", "max_data_time", CONF_DURATION, 1 * SEC, 1 * DAY, "30m", NULL,
	  "time the data of one message (DATA or all its BDAT chunks) may take, however busy "
	  "the client",
	  CONF_AT(mtad.max_data_time_ms) },
	{ "mtad", "auth_require_tls", CONF_BOOL, 0, 0, "yes", NULL, "offer AUTH only over TLS",
	  CONF_AT(mtad.auth_require_tls) },
	{ "mtad", "bare_lf", CONF_ENUM, 0, 0, "reject", "reject|normalize",
	  "a message with bare LF: refuse it (554) or turn it into CRLF", CONF_AT(mtad.bare_lf) },
	{ "mtad", "sender_login_check", CONF_ENUM, 0, 0, "strict", "strict|off",
	  "strict: an authenticated user may use as MAIL FROM only its own addresses (the "
	  "directory's address and aliases, +detail forms) and those sender_login_map grants it, "
	  "and <> for one recipient (else 553/550 5.7.1); off: any",
	  CONF_AT(mtad.sender_login_check) },
	{ "mtad", "sender_login_exempt", CONF_LIST, 0, 0, "", NULL,
	  "logins that may use any envelope sender (a gateway account, say)",
	  CONF_AT(mtad.sender_login_exempt) },
	{ "mtad", "sender_login_map", CONF_STR, 0, 0, "", NULL,
	  "file of 'address login[,login...]' lines ('@domain' for a whole domain): who else may "
	  "send as an address (shared mailboxes, role addresses); read at start and on SIGHUP",
	  CONF_AT(mtad.sender_login_map) },
	{ "mtad", "reject_unauth_local_sender", CONF_BOOL, 0, 0, "yes", NULL,
	  "refuse (553 5.7.1) MAIL FROM one of local_domains on port 25 from a client that is "
	  "not logged in and not in trusted_networks",
	  CONF_AT(mtad.reject_unauth_local_sender) },
	{ "mtad", "received_auth", CONF_BOOL, 0, 0, "yes", NULL,
	  "the Received: header of mail from an authenticated client names its login "
	  "(\"(authenticated as LOGIN)\")",
	  CONF_AT(mtad.received_auth) },
	{ "mtad", "retry_schedule", CONF_DURLIST, 1 * SEC, 30 * DAY, "1m,5m,15m,1h,2h", NULL,
	  "delays between relay attempts; the last repeats", CONF_AT(mtad.retry_schedule) },
	{ "mtad", "max_queue_lifetime", CONF_DURATION, 1 * MIN, 60 * DAY, "5d", NULL,
	  "after this a deferred message bounces", CONF_AT(mtad.max_queue_lifetime_ms) },
	{ "mtad", "relay_concurrency", CONF_INT, 1, 10000, "20", NULL,
	  "connections per destination", CONF_AT(mtad.relay_concurrency) },
	{ "mtad", "relay_port", CONF_INT, 1, 65535, "25", NULL,
	  "TCP port of the mail exchangers found through DNS (tests use another)",
	  CONF_AT(mtad.relay_port) },
	{ "mtad", "mta_sts_port", CONF_INT, 1, 65535, "443", NULL,
	  "HTTPS port of MTA-STS policy hosts (mta-sts.DOMAIN; tests use another)",
	  CONF_AT(mtad.mta_sts_port) },
	{ "mtad", "relay_timeout", CONF_DURATION, 1 * SEC, 1 * HOUR, "5m", NULL,
	  "timeout for each step of a relay session", CONF_AT(mtad.relay_timeout_ms) },
	{ "mtad", "delay_warning", CONF_DURATION, 0, 60 * DAY, "4h", NULL,
	  "a sender who asked NOTIFY=DELAY gets one delay notice per message deferred this long "
	  "(0: never)",
	  CONF_AT(mtad.delay_warning_ms) },
	{ "mtad", "authserv_id", CONF_STR, 0, 0, "", NULL,
	  "the authserv-id of the Authentication-Results header mtad adds to inbound mail (an "
	  "existing one claiming it is removed); empty: the hostname",
	  CONF_AT(mtad.authserv_id) },
	{ "mtad", "postmaster", CONF_STR, 0, 0, "postmaster", NULL,
	  "who receives mail for postmaster@ every local domain and the bare <postmaster> "
	  "(RFC 5321 4.5.1), which is always accepted: the aliases map is asked first, then "
	  "the directory; when neither names a mailbox, this login's store mailbox (made on "
	  "first mail; read it with mailctl or make it a directory user) or, with an @, this "
	  "address (local through the directory, external through the relay queue)",
	  CONF_AT(mtad.postmaster) },
	{ "mtad", "recipient_delimiter", CONF_STR, 0, 0, "+", NULL,
	  "characters (at most 8 of + - _ = . # % ~) that separate a local part from its "
	  "detail: user+tag@ is delivered to user and Sieve's subaddress extension sees :user "
	  "and :detail (its separator is the first character); empty: no subaddressing",
	  CONF_AT(mtad.recipient_delimiter) },
	{ "mtad", "subaddress_folder", CONF_BOOL, 0, 0, "no", NULL,
	  "yes: user+tag@ is delivered into the user's folder named tag when it exists (else "
	  "INBOX); with a Sieve script, its keep (implicit or explicit) goes there too",
	  CONF_AT(mtad.subaddress_folder) },
	{ "mtad", "aliases", CONF_STR, 0, 0, "", NULL,
	  "the aliases file (see ALIASES below): read at start (an error stops mtad), on "
	  "SIGHUP and at most a second after it changes (an error keeps the previous map, "
	  "with a warning naming the line; replace the file by rename); empty: none",
	  CONF_AT(mtad.aliases) },
	{ "mtad", "srs_secret_file", CONF_STR, 0, 0, "", NULL,
	  "the Sender Rewriting Scheme's secrets (one a line, the first signs, the others are "
	  "still accepted on bounces; '#' lines skipped): mail forwarded off-site (an alias's "
	  "external target, a Sieve redirect) gets the envelope sender "
	  "SRS0=HASH=TT=domain=local@srs_domain unless the sender is <> or of local_domains, and "
	  "a RCPT to such an address (SRS0 or SRS1) is reversed after its hash and age are "
	  "checked (550 5.1.1 when forged or expired); read at start and on SIGHUP; empty: off",
	  CONF_AT(mtad.srs_secret_file) },
	{ "mtad", "srs_domain", CONF_STR, 0, 0, "", NULL,
	  "the domain of SRS addresses (its MX must be this server); empty: the first of "
	  "local_domains",
	  CONF_AT(mtad.srs_domain) },
	{ "mtad", "srs_max_age", CONF_INT, 1, 1000, "21", NULL,
	  "days an SRS address is accepted as a bounce's recipient", CONF_AT(mtad.srs_max_age) },
	{ "mtad", "local_submission", CONF_ADDRS, 0, 0, "", NULL,
	  "unix sockets (/path, mode 0666) where local programs (heron-sendmail, cron, "
	  "monitoring) submit without AUTH: the peer's uid (SO_PEERCRED) is logged and written "
	  "into the Received: header, and its mail may relay as trusted_networks' may; limit "
	  "who may submit with the permissions of the socket's directory (a unix socket in "
	  "submission behaves the same, mode 0660); the shipped heron.conf sets "
	  "/run/heron/submit.sock",
	  CONF_AT(mtad.local_submission) },
	{ "mtad", "maildrop", CONF_STR, 0, 0, "", NULL,
	  "a directory where heron-sendmail leaves a message when mtad is not running (mode "
	  "1733, owned by mtad's user: anyone may drop, no one may list it or remove another's "
	  "file; see heron-sendmail(8)); mtad's worker 0 submits each file over "
	  "local_submission at start, at once when one appears (inotify) and every 10 s, and "
	  "removes it once the message is durable; empty: none (heron-sendmail exits 75 when "
	  "mtad is down); the shipped heron.conf sets /var/spool/heron/maildrop",
	  CONF_AT(mtad.maildrop) },
	{ "mtad", "burl_imap", CONF_STR, 0, 0, "", NULL,
	  "address:port of the imapd BURL (RFC 4468) fetches URLAUTH URLs from (over plain TCP "
	  "or TLS: burl_tls); set: the submission listeners offer BURL imap; empty: no BURL",
	  CONF_AT(mtad.burl_imap) },
	{ "mtad", "burl_user", CONF_STR, 0, 0, "", NULL,
	  "the login BURL uses at imapd: one of imapd's [imapd] urlauth_submit_users",
	  CONF_AT(mtad.burl_user) },
	{ "mtad", "burl_password_file", CONF_STR, 0, 0, "", NULL,
	  "file whose first line is burl_user's password (read once per worker)",
	  CONF_AT(mtad.burl_password_file) },
	{ "mtad", "burl_timeout", CONF_DURATION, 1 * SEC, 10 * MIN, "30s", NULL,
	  "idle time allowed on BURL's connection to imapd (then 451 4.4.1)",
	  CONF_AT(mtad.burl_timeout_ms) },
	{ "mtad", "burl_tls", CONF_ENUM, 0, 0, "no", "no|starttls|implicit",
	  "TLS on BURL's connection to imapd: none (imapd on loopback or a trusted network), "
	  "STARTTLS on burl_imap's port, or implicit TLS (burl_imap names imapd's listen_tls "
	  "port); the certificate must verify against [tls] ca (empty: the system's CAs) and "
	  "carry burl_tls_name; no TLS, no login (451 4.4.1)",
	  CONF_AT(mtad.burl_tls) },
	{ "mtad", "burl_tls_name", CONF_STR, 0, 0, "", NULL,
	  "the name (or address) imapd's certificate must carry for burl_tls; empty: "
	  "burl_imap's address",
	  CONF_AT(mtad.burl_tls_name) },

	{ "dns", "resolv_conf", CONF_STR, 0, 0, "/etc/resolv.conf", NULL,
	  "nameservers are read from this file when nameservers is empty (both empty: full "
	  "recursion from the root)",
	  CONF_AT(dns.resolv_conf) },
	{ "dns", "nameservers", CONF_LIST, 0, 0, "", NULL,
	  "resolvers to ask (addr, addr@port, [v6]:port); empty: those of resolv_conf",
	  CONF_AT(dns.nameservers) },
	{ "dns", "timeout", CONF_DURATION, 100, 5 * MIN, "5s", NULL,
	  "how long one attempt of a lookup may take", CONF_AT(dns.timeout_ms) },
	{ "dns", "attempts", CONF_INT, 1, 10, "2", NULL,
	  "attempts of a lookup before it fails as temporary", CONF_AT(dns.attempts) },
	{ "dns", "dnssec", CONF_ENUM, 0, 0, "validate", "validate|trust-ad|off",
	  "validate: check DNSSEC ourselves from trust_anchor_file; trust-ad: believe the AD bit "
	  "of the first nameserver (it must validate, the path to it be safe); off: nothing is "
	  "secure (no DANE)",
	  CONF_AT(dns.dnssec) },
	{ "dns", "trust_anchor_file", CONF_STR, 0, 0, "/usr/share/dns/root.key", NULL,
	  "DNSSEC trust anchors (DS or DNSKEY records, zone-file format) for dnssec = validate",
	  CONF_AT(dns.trust_anchor_file) },
	{ "dns", "cache_size", CONF_INT, 0, 10000000, "10000", NULL,
	  "answers each process keeps for their TTL (0: no cache)", CONF_AT(dns.cache_size) },

	{ "dkim", "sign", CONF_STR, 0, 0, "", NULL,
	  "signing keys, separated by spaces: domain:selector:keyfile (PEM, RSA or Ed25519, "
	  "`mailctl dkim keygen`); mail submitted by authenticated users or trusted_networks "
	  "whose From domain is domain (or below it) is signed with every key of that domain, "
	  "relaxed/relaxed; empty: no signing",
	  CONF_AT(dkim.sign) },
	{ "dkim", "sign_headers", CONF_LIST, 0, 0, "", NULL,
	  "header fields signed when present (From is always signed and oversigned); empty: "
	  "From, Reply-To, Subject, Date, To, Cc, Message-ID, In-Reply-To, References, "
	  "MIME-Version, Content-Type, Content-Transfer-Encoding, Content-Language, List-Id, "
	  "List-Unsubscribe(-Post), Sender, Resent-From/Date/To/Cc",
	  CONF_AT(dkim.sign_headers) },
	{ "dkim", "signature_ttl", CONF_DURATION, 0, 3650 * DAY, "0", NULL,
	  "signatures expire this long after signing (x=); 0: no expiry",
	  CONF_AT(dkim.signature_ttl_ms) },
	{ "dkim", "verify", CONF_BOOL, 0, 0, "yes", NULL,
	  "verify every DKIM signature of mail arriving on the listen (port 25) listener from "
	  "outside trusted_networks (needs [dns])",
	  CONF_AT(dkim.verify) },
	{ "dkim", "min_rsa_bits", CONF_INT, 1024, 8192, "1024", NULL,
	  "RSA keys shorter than this make a signature permerror (RFC 8301)",
	  CONF_AT(dkim.min_rsa_bits) },

	{ "spf", "verify", CONF_BOOL, 0, 0, "yes", NULL,
	  "check the SPF record of the MAIL FROM domain (RFC 7208) of mail arriving on the "
	  "listen listener from outside trusted_networks",
	  CONF_AT(spf.verify) },
	{ "spf", "helo", CONF_BOOL, 0, 0, "yes", NULL,
	  "also check the HELO name (reported as smtp.helo)", CONF_AT(spf.helo) },
	{ "spf", "reject_fail", CONF_BOOL, 0, 0, "no", NULL,
	  "refuse MAIL FROM with 550 5.7.23 when SPF fails (-all); no: the result is only "
	  "reported and used by DMARC",
	  CONF_AT(spf.reject_fail) },

	{ "dmarc", "verify", CONF_BOOL, 0, 0, "yes", NULL,
	  "evaluate the From domain's DMARC policy (RFC 7489) on mail SPF and DKIM were "
	  "checked for",
	  CONF_AT(dmarc.verify) },
	{ "dmarc", "reject", CONF_BOOL, 0, 0, "yes", NULL,
	  "refuse at the end of data (550 5.7.1) a message failing DMARC whose policy is "
	  "reject; no: deliver it as quarantined",
	  CONF_AT(dmarc.reject) },
	{ "dmarc", "quarantine", CONF_BOOL, 0, 0, "yes", NULL,
	  "deliver a message failing DMARC whose policy is quarantine to each local "
	  "recipient's Junk mailbox (special-use Junk; made when missing); no: to INBOX",
	  CONF_AT(dmarc.quarantine) },
	{ "dmarc", "psl", CONF_STR, 0, 0, "/usr/share/publicsuffix/public_suffix_list.dat", NULL,
	  "the Public Suffix List giving organizational domains", CONF_AT(dmarc.psl) },

	{ "sieve", "before", CONF_STR, 0, 0, "", NULL,
	  "admin script run before each user's script at local delivery (empty: none)",
	  CONF_AT(sieve.before) },
	{ "sieve", "after", CONF_STR, 0, 0, "", NULL,
	  "admin script run after each user's script (unless it stopped) (empty: none)",
	  CONF_AT(sieve.after) },
	{ "sieve", "max_script_size", CONF_SIZE, 1 * KiB, 16 * MiB, "1M", NULL,
	  "largest script accepted (ManageSieve, mailctl)", CONF_AT(sieve.max_script_size) },
	{ "sieve", "max_scripts", CONF_INT, 1, 10000, "20", NULL,
	  "scripts a user may store (ManageSieve quota)", CONF_AT(sieve.max_scripts) },
	{ "sieve", "max_storage", CONF_SIZE, 1 * KiB, 1 * GiB, "10M", NULL,
	  "bytes of script source a user may store (ManageSieve quota)",
	  CONF_AT(sieve.max_storage) },
	{ "sieve", "max_instructions", CONF_INT, 100, 100000000, "100000", NULL,
	  "instructions one delivery may run (scripts and includes); past it the message is kept",
	  CONF_AT(sieve.max_instructions) },
	{ "sieve", "max_redirects", CONF_INT, 0, 100, "4", NULL, "redirects per message",
	  CONF_AT(sieve.max_redirects) },
	{ "sieve", "max_actions", CONF_INT, 1, 1000, "32", NULL,
	  "actions (fileinto, keep, redirect, vacation) per message", CONF_AT(sieve.max_actions) },
	{ "sieve", "max_header_bytes", CONF_SIZE, 1 * KiB, 1 * GiB, "16M", NULL,
	  "header bytes the tests of one delivery may compare", CONF_AT(sieve.max_header_bytes) },
	{ "sieve", "max_body_bytes", CONF_SIZE, 0, 1 * GiB, "16M", NULL,
	  "body bytes the body tests of one delivery may search", CONF_AT(sieve.max_body_bytes) },
	{ "sieve", "spam_header", CONF_STR, 0, 0, "", NULL,
	  "header with the spam scanner's score for spamtest (empty: rspamd's X-Spamd-Result "
	  "with its own threshold, else X-Spam-Score; the scanner must remove a sender's copy "
	  "of the field, as rspamd does with its own)",
	  CONF_AT(sieve.spam_header) },
	{ "sieve", "spam_max", CONF_INT, 1, 1000, "15", NULL,
	  "the score spamtest maps to 10 (spamtestplus :percent to 100)",
	  CONF_AT(sieve.spam_max) },
	{ "sieve", "virus_header", CONF_STR, 0, 0, "X-Virus-Scan", NULL,
	  "header with the virus scanner's verdict (virustest: clean, infected)",
	  CONF_AT(sieve.virus_header) },
	{ "sieve", "vacation_min_days", CONF_INT, 0, 365, "1", NULL,
	  "shortest vacation :days honoured (smaller values are raised to it; :seconds too)",
	  CONF_AT(sieve.vacation_min_days) },
	{ "sieve", "listen", CONF_ADDRS, 0, 0, "*:4190", NULL,
	  "ManageSieve listeners (managesieved; STARTTLS)", CONF_AT(sieve.listen) },
	{ "sieve", "workers", CONF_INT, 1, 64, "1", NULL, "managesieved worker processes",
	  CONF_AT(sieve.workers) },
	{ "sieve", "user", CONF_STR, 0, 0, "heron", NULL,
	  "user managesieved's master and workers run as when started as root (the master once its "
	  "listeners are bound; the package makes heron); empty: keep root, only with allow_root",
	  CONF_AT(sieve.user) },
	{ "sieve", "allow_root", CONF_BOOL, 0, 0, "no", NULL,
	  "managesieved runs as root when started as root with user empty (else it refuses to "
	  "start)",
	  CONF_AT(sieve.allow_root) },
	{ "sieve", "pidfile", CONF_STR, 0, 0, "", NULL,
	  "pid file of the managesieved master (empty: none)", CONF_AT(sieve.pidfile) },
	{ "sieve", "max_connections", CONF_INT, 1, 1000000, "1000", NULL,
	  "concurrent ManageSieve connections per worker", CONF_AT(sieve.max_connections) },
	{ "sieve", "allow_plaintext_auth", CONF_BOOL, 0, 0, "no", NULL,
	  "allow AUTHENTICATE without TLS", CONF_AT(sieve.allow_plaintext_auth) },
	{ "sieve", "timeout", CONF_DURATION, 1 * SEC, 1 * DAY, "30m", NULL,
	  "idle time allowed in a ManageSieve session", CONF_AT(sieve.timeout_ms) },
	CONF_PROXY_KEYS(
		sieve, "4190",
		"front host: a user whose mailHost is another host ([imapd] hostname) is "
		"authenticated at that host's managesieved with the proxy credential and the "
		"session relayed there (no: a REFERRAL)",
		"front host: mailHost=address:port entries, where each store host's "
		"managesieved listens; a mailHost not listed is reached at its name on "
		"proxy_port",
		"ManageSieve port of the store hosts not in proxy_hosts",
		"authentication identity of the ManageSieve proxy login (the authorization "
		"identity is the user's address)",
		"file whose first line is the shared secret of the ManageSieve proxy login "
		"(fronts send it, store hosts check it; empty: no proxy login)",
		"store host: the front addresses whose ManageSieve proxy logins are accepted "
		"(empty: none); any client from one is taken for a front (AUTHENTICATE without "
		"TLS allowed): list only addresses nothing but a front connects from "
		"(docs/deploy.md)",
		"front host: time allowed to connect and log in at a store host's managesieved"),

	{ "imapd", "listen", CONF_ADDRS, 0, 0, "*:143", NULL, "IMAP listeners (STARTTLS)",
	  CONF_AT(imapd.listen) },
	{ "imapd", "listen_tls", CONF_ADDRS, 0, 0, "", NULL,
	  "implicit-TLS IMAP listeners, e.g. *:993 (needs [tls] cert)",
	  CONF_AT(imapd.listen_tls) },
	{ "imapd", "workers", CONF_INT, 1, 256, "2", NULL, "worker processes",
	  CONF_AT(imapd.workers) },
	{ "imapd", "user", CONF_STR, 0, 0, "heron", NULL,
	  "user the master and workers run as when started as root (the master once its "
	  "listeners are bound; the package makes heron); empty: keep root, only with allow_root",
	  CONF_AT(imapd.user) },
	{ "imapd", "allow_root", CONF_BOOL, 0, 0, "no", NULL,
	  "run as root when started as root with user empty (else imapd refuses to start)",
	  CONF_AT(imapd.allow_root) },
	{ "imapd", "pidfile", CONF_STR, 0, 0, "", NULL, "pid file of the master (empty: none)",
	  CONF_AT(imapd.pidfile) },
	{ "imapd", "hostname", CONF_STR, 0, 0, "", NULL,
	  "this host's name in users' mailHost: a user whose mailHost names another host is "
	  "referred there at login (empty: the host name)",
	  CONF_AT(imapd.hostname) },
	CONF_PROXY_KEYS(
		imapd, "143",
		"front role: a user whose mailHost names another host is logged in there with "
		"the proxy credential and the session relayed to that host's imapd (no: a "
		"login referral)",
		"HOST=address:port entries: where the imapd of store host HOST (a mailHost "
		"value) listens; a mailHost not listed is reached at its name on proxy_port",
		"IMAP port of the store hosts not in proxy_hosts",
		"the SASL PLAIN authentication identity a front logs in with at a store host "
		"(the user is the authorization identity)",
		"file whose first line is the shared secret of the proxy login (fronts send it, "
		"store hosts check it; empty: no proxy login)",
		"store host: the front addresses whose proxy logins are accepted (empty: none); "
		"any client from one is taken for a front before login (its ID's "
		"x-originating-ip believed, login without TLS allowed): list only addresses "
		"nothing but a front connects from (docs/deploy.md)",
		"front: connecting and logging in at the store host, at most (then NO "
		"[UNAVAILABLE])"),
	{ "imapd", "proxy_pool_max", CONF_INT, 0, 100000, "64", NULL,
	  "front: store host connections a worker keeps parked after their clients' LOGOUT "
	  "(UNAUTHENTICATE, RFC 8437) for the next logins of those hosts' users, all hosts "
	  "together; 0: none parked, every proxied login dials",
	  CONF_AT(imapd.proxy_pool_max) },
	{ "imapd", "proxy_pool_max_per_host", CONF_INT, 1, 100000, "16", NULL,
	  "front: parked connections a worker keeps to one store host",
	  CONF_AT(imapd.proxy_pool_max_per_host) },
	{ "imapd", "proxy_pool_idle", CONF_DURATION, 1 * SEC, 1 * HOUR, "30s", NULL,
	  "front: how long a connection stays parked unused, then is closed; keep it below "
	  "the store hosts' login_timeout (a parked connection is not logged in there)",
	  CONF_AT(imapd.proxy_pool_idle_ms) },
	{ "imapd", "max_connections", CONF_INT, 1, 10000000, "20000", NULL,
	  "concurrent IMAP connections of all workers (more are answered BYE and closed)",
	  CONF_AT(imapd.max_connections) },
	{ "imapd", "max_connections_per_ip", CONF_INT, 1, 10000000, "1000", NULL,
	  "concurrent connections from one client address, all workers (more get BYE)",
	  CONF_AT(imapd.max_connections_per_ip) },
	{ "imapd", "max_unauth_connections_per_ip", CONF_INT, 1, 10000000, "50", NULL,
	  "connections from one client address not logged in yet, all workers (more get BYE)",
	  CONF_AT(imapd.max_unauth_connections_per_ip) },
	{ "imapd", "max_connections_per_user", CONF_INT, 1, 100000, "20", NULL,
	  "concurrent sessions of one user, all workers (more get NO [LIMIT] at login)",
	  CONF_AT(imapd.max_connections_per_user) },
	{ "imapd", "allow_plaintext_auth", CONF_BOOL, 0, 0, "no", NULL,
	  "allow LOGIN/AUTHENTICATE without TLS", CONF_AT(imapd.allow_plaintext_auth) },
	{ "imapd", "login_timeout", CONF_DURATION, 1 * SEC, 1 * HOUR, "60s", NULL,
	  "time a connection may take to log in, from its connect (whatever it sends "
	  "meanwhile)",
	  CONF_AT(imapd.login_timeout_ms) },
	{ "imapd", "idle_timeout", CONF_DURATION, 30 * MIN, 1 * DAY, "30m", NULL,
	  "idle time allowed after login (RFC 3501: at least 30 minutes)",
	  CONF_AT(imapd.idle_timeout_ms) },
	{ "imapd", "line_max", CONF_SIZE, 1 * KiB, 16 * MiB, "64k", NULL,
	  "longest command line (literals excluded)", CONF_AT(imapd.line_max) },
	{ "imapd", "literal_max", CONF_SIZE, 1 * KiB, 16 * MiB, "64k", NULL,
	  "largest literal outside APPEND", CONF_AT(imapd.literal_max) },
	{ "imapd", "max_append_size", CONF_SIZE, 1 * KiB, 2 * GiB, "50M", NULL,
	  "largest message APPEND takes (APPENDLIMIT)", CONF_AT(imapd.max_append_size) },
	{ "imapd", "max_bad_commands", CONF_INT, 1, 1000, "10", NULL,
	  "consecutive invalid commands before the session is closed with BYE",
	  CONF_AT(imapd.max_bad_commands) },
	{ "imapd", "max_mailboxes_per_user", CONF_INT, 0, 10000000, "10000", NULL,
	  "mailboxes one user may have, \\Noselect parents included (CREATE, RENAME and "
	  "mailctl mailbox create past it get NO [LIMIT]); 0: no limit",
	  CONF_AT(imapd.max_mailboxes_per_user) },
	{ "imapd", "max_mailbox_depth", CONF_INT, 0, 1000, "32", NULL,
	  "levels of a mailbox name (a/b/c has 3) CREATE, RENAME and mailctl accept; 0: no "
	  "limit",
	  CONF_AT(imapd.max_mailbox_depth) },
	{ "imapd", "metadata_max_size", CONF_SIZE, 1 * KiB, 16 * MiB, "64k", NULL,
	  "largest annotation value SETMETADATA takes (RFC 5464: NO [METADATA MAXSIZE n] past "
	  "it); a value also has to fit in literal_max",
	  CONF_AT(imapd.metadata_max_size) },
	{ "imapd", "metadata_max_entries", CONF_INT, 10, 100000, "100", NULL,
	  "annotations one mailbox may have, and one user's server annotations (NO [METADATA "
	  "TOOMANY] past it)",
	  CONF_AT(imapd.metadata_max_entries) },
	{ "imapd", "metadata_private", CONF_BOOL, 0, 0, "yes", NULL,
	  "whether SETMETADATA takes /private annotations (no: NO [METADATA NOPRIVATE])",
	  CONF_AT(imapd.metadata_private) },
	{ "imapd", "metadata_admin", CONF_STR, 0, 0, "", NULL,
	  "the server annotation /shared/admin, a URI to reach the administrator such as "
	  "mailto:postmaster@example.org (empty: none); read-only for clients",
	  CONF_AT(imapd.metadata_admin) },
	{ "imapd", "metadata_comment", CONF_STR, 0, 0, "", NULL,
	  "the server annotation /shared/comment (empty: none); read-only for clients",
	  CONF_AT(imapd.metadata_comment) },
	{ "imapd", "namespace_other", CONF_STR, 0, 0, "", NULL,
	  "prefix of the other users' namespace (RFC 2342), such as \"Other Users/\" (ending "
	  "in /): PREFIX/USER/MAILBOX names a mailbox USER shared with an ACL (RFC 4314); empty: "
	  "no such namespace, NAMESPACE answers the personal one only",
	  CONF_AT(imapd.namespace_other) },
	{ "imapd", "namespace_shared", CONF_STR, 0, 0, "", NULL,
	  "prefix of the shared (public) namespace, such as \"Shared/\" (ending in /): "
	  "PREFIX/MAILBOX names a mailbox of the store user shared_owner, seen by the rights its "
	  "ACL gives; empty: no such namespace",
	  CONF_AT(imapd.namespace_shared) },
	{ "imapd", "shared_owner", CONF_STR, 0, 0, "shared", NULL,
	  "the store user whose mailboxes make the shared namespace (created with mailctl user "
	  "add; its ACLs set with mailctl acl)",
	  CONF_AT(imapd.shared_owner) },
	{ "imapd", "urlauth_submit_users", CONF_LIST, 0, 0, "", NULL,
	  "users (logins) that act as the submission server: they may URLFETCH the URLAUTH URLs "
	  "of access submit+USER for any USER (mtad's [mtad] burl_user for BURL); empty: none",
	  CONF_AT(imapd.urlauth_submit_users) },

	{ "sink", "listen", CONF_ADDRS, 0, 0, "127.0.0.1:1100", NULL, "SMTP listeners",
	  CONF_AT(sink.listen) },
	{ "sink", "control", CONF_ADDRS, 0, 0, "127.0.0.1:1101", NULL, "control port (JSON lines)",
	  CONF_AT(sink.control) },
	{ "sink", "workers", CONF_INT, 1, 256, "1", NULL, "worker processes",
	  CONF_AT(sink.workers) },
	{ "sink", "keep", CONF_STR, 0, 0, "", NULL,
	  "keep received messages in this Maildir (empty: discard)", CONF_AT(sink.keep) },
	{ "sink", "pidfile", CONF_STR, 0, 0, "", NULL, "pid file (empty: none)",
	  CONF_AT(sink.pidfile) },
	{ "sink", "user", CONF_STR, 0, 0, "", NULL,
	  "user to run as when started as root (empty: stay as started)", CONF_AT(sink.user) },
	{ "sink", "hostname", CONF_STR, 0, 0, "", NULL,
	  "name in the greeting and the generated certificate (empty: the host name)",
	  CONF_AT(sink.hostname) },
	{ "sink", "max_connections", CONF_INT, 1, 1000000, "20000", NULL,
	  "concurrent SMTP connections of all workers (more are answered 421 and closed)",
	  CONF_AT(sink.max_connections) },
	{ "sink", "max_message_size", CONF_SIZE, 1 * KiB, 2 * GiB, "50M", NULL,
	  "largest message accepted (SIZE); bigger ones get 552", CONF_AT(sink.max_message_size) },
	{ "sink", "max_recipients", CONF_INT, 1, 100000, "1000", NULL,
	  "recipients per message; more get 452 4.5.3", CONF_AT(sink.max_recipients) },
	{ "sink", "timeout", CONF_DURATION, 1 * SEC, 1 * HOUR, "5m", NULL,
	  "idle time allowed in a session", CONF_AT(sink.timeout_ms) },
	{ "sink", "starttls", CONF_BOOL, 0, 0, "yes", NULL,
	  "offer STARTTLS ([tls] cert, or a generated self-signed one when it is empty)",
	  CONF_AT(sink.starttls) },
	{ "sink", "record_memory", CONF_SIZE, 0, 64 * GiB, "64M", NULL,
	  "memory for arrival records; when full the oldest go (records_dropped counts unread ones)",
	  CONF_AT(sink.record_memory) },
	{ "sink", "records", CONF_ENUM, 0, 0, "stamped", "stamped|all",
	  "which messages get an arrival record: those with X-Mailload-Sent, or all",
	  CONF_AT(sink.records) },

	{ "milter", "smtpd_milters", CONF_STR, 0, 0, "", NULL,
	  "milters every message received over SMTP and submission passes, in order: "
	  "inet:HOST:PORT or unix:PATH, separated by spaces or commas; { ADDRESS, "
	  "connect_timeout=D, command_timeout=D, content_timeout=D, default_action=A } sets "
	  "one milter's own values (empty: none)",
	  CONF_AT(milter.smtpd_milters) },
	{ "milter", "non_smtpd_milters", CONF_STR, 0, 0, "", NULL,
	  "milters for mail received over LMTP (the local submission path), same syntax",
	  CONF_AT(milter.non_smtpd_milters) },
	{ "milter", "milter_default_action", CONF_ENUM, 0, 0, "tempfail", "tempfail|accept|reject",
	  "what a step (or the message) gets when a milter is down, times out or answers "
	  "garbage: 451, accepted as if the milter were not there, or 554",
	  CONF_AT(milter.default_action) },
	{ "milter", "connect_timeout", CONF_DURATION, 100, 1 * HOUR, "30s", NULL,
	  "time to connect to a milter and negotiate options",
	  CONF_AT(milter.connect_timeout_ms) },
	{ "milter", "command_timeout", CONF_DURATION, 100, 1 * HOUR, "30s", NULL,
	  "time a milter may take to answer one command (connect, HELO, MAIL, RCPT, DATA, "
	  "a header)",
	  CONF_AT(milter.command_timeout_ms) },
	{ "milter", "content_timeout", CONF_DURATION, 100, 1 * HOUR, "300s", NULL,
	  "time a milter may take to take the body and answer the end of the message",
	  CONF_AT(milter.content_timeout_ms) },

	{ "metrics", "enabled", CONF_BOOL, 0, 0, "no", NULL,
	  "yes: each daemon serves Prometheus metrics over HTTP on its *_listen address below",
	  CONF_AT(metrics.enabled) },
	{ "metrics", "mtad_listen", CONF_ADDRS, 0, 0, "127.0.0.1:9325", NULL,
	  "mtad's metrics endpoint (GET /metrics); empty: none", CONF_AT(metrics.mtad_listen) },
	{ "metrics", "imapd_listen", CONF_ADDRS, 0, 0, "127.0.0.1:9326", NULL,
	  "imapd's metrics endpoint; empty: none", CONF_AT(metrics.imapd_listen) },
	{ "metrics", "managesieved_listen", CONF_ADDRS, 0, 0, "127.0.0.1:9327", NULL,
	  "managesieved's metrics endpoint; empty: none", CONF_AT(metrics.managesieved_listen) },
	{ "metrics", "sink_listen", CONF_ADDRS, 0, 0, "127.0.0.1:9328", NULL,
	  "the sink's metrics endpoint; empty: none", CONF_AT(metrics.sink_listen) },
	{ "metrics", "allow", CONF_CIDRS, 0, 0, "127.0.0.0/8, ::1", NULL,
	  "clients that may scrape (others are closed unread); empty: any",
	  CONF_AT(metrics.allow) },
	{ "metrics", "max_connections", CONF_INT, 1, 1000, "8", NULL,
	  "scrapes served at once per worker (past it new ones wait in the backlog); also the "
	  "control socket's",
	  CONF_AT(metrics.max_connections) },
	{ "metrics", "timeout", CONF_DURATION, 100, 10 * MIN, "10s", NULL,
	  "a scrape or control request must arrive and its answer leave within this",
	  CONF_AT(metrics.timeout_ms) },

	{ "control", "dir", CONF_STR, 0, 0, "/run/heron", NULL,
	  "each daemon worker's control socket IDENT.N.sock lives here (mailctl who, kick, stats "
	  "--live); mode 0660 for the daemon's user and group; empty: none",
	  CONF_AT(control.dir) },

	{ "log", "target", CONF_ENUM, 0, 0, "syslog", "syslog|stderr|file",
	  "where log lines go (-f forces stderr); file: appended to [log] file, reopened on SIGUSR1",
	  CONF_AT(log.target) },
	{ "log", "file", CONF_STR, 0, 0, "/var/log/heron/heron.log", NULL,
	  "the log file of target = file (every program may share it: a line is one write)",
	  CONF_AT(log.file) },
	{ "log", "level", CONF_ENUM, 0, 0, "info", "err|warn|info|debug", "lowest level logged",
	  CONF_AT(log.level) },
	{ "log", "facility", CONF_ENUM, 0, 0, "mail",
	  "mail|daemon|user|local0|local1|local2|local3|local4|local5|local6|local7",
	  "syslog facility", CONF_AT(log.facility) },
};

const size_t conf_nkeys = sizeof(conf_keys) / sizeof(conf_keys[0]);
