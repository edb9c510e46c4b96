/* conf_keys.h — the typed values of heron.conf: one struct per section, one field per key
 * of conf_keys.c, filled once when the file is read (conf_values()). A key is added in three
 * places: its row in conf_keys.c (naming its field with CONF_AT), its field here, and its
 * documentation with the default in etc/heron.conf.
 *
 * Field types by key type: CONF_STR const char * (never NULL), CONF_INT and CONF_DURATION
 * int64_t (durations in ms: the field ends in _ms), CONF_SIZE uint64_t (bytes), CONF_BOOL
 * bool, CONF_ENUM the enum declared next to it (in the order of the key's choices),
 * CONF_ADDRS, CONF_CIDRS, CONF_LIST and CONF_DURLIST a pointer to the parsed list. Strings
 * and lists belong to the struct conf they came from: keep it alive while they are used. */
#ifndef HERON_CONF_KEYS_H
#define HERON_CONF_KEYS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/log.h"

struct conf_addrs;
struct conf_cidrs;
struct conf_list;

/* [store]: libstore (store_opts_from_conf), mailctl */
struct store_conf {
	const char *path;
	int64_t partitions;
	uint64_t map_size;
	uint64_t map_size_max;
	int64_t expunge_history_ms;
	int64_t expunge_history_max;
	int64_t group_commit_delay_ms;
	int64_t group_commit_max;
	bool group_commit_syncfs;
	bool fsync_flags;
	bool fts;
	uint64_t inline_max;
	int64_t tombstone_age_ms;
};

/* [directory]: libldapauth */
enum directory_backend { DIRECTORY_BACKEND_LDAP, DIRECTORY_BACKEND_FILE };
enum directory_scope { DIRECTORY_SCOPE_SUB, DIRECTORY_SCOPE_ONE, DIRECTORY_SCOPE_BASE };
enum directory_auth_mode { DIRECTORY_AUTH_BIND, DIRECTORY_AUTH_LOOKUP };
enum directory_password_scheme {
	DIRECTORY_PW_AUTO,
	DIRECTORY_PW_SSHA,
	DIRECTORY_PW_SSHA256,
	DIRECTORY_PW_SSHA512,
	DIRECTORY_PW_CRYPT,
	DIRECTORY_PW_ARGON2,
	DIRECTORY_PW_SCRAM_SHA_256,
};
struct directory_conf {
	enum directory_backend backend;
	const char *uri;
	const char *base;
	enum directory_scope scope;
	const char *bind_dn;
	const char *bind_password_file;
	bool starttls;
	enum directory_auth_mode auth_mode;
	bool scram;
	const char *user_filter;
	const char *address_filter;
	const char *login_attribute;
	const char *address_attribute;
	const struct conf_list *alias_attributes;
	const char *mailhost_attribute;
	const char *partition_attribute;
	const char *quota_attribute;
	const char *password_attribute;
	const char *users_file;
	enum directory_password_scheme password_scheme;
	int64_t pool_size;
	int64_t bind_pool_size;
	int64_t timeout_ms;
	int64_t auth_cache_size;
	int64_t auth_cache_ttl_ms;
	int64_t negative_cache_ttl_ms;
	uint64_t negative_cache_memory;
	const char *login_throttle_file;
	int64_t login_throttle_slots;
};

/* [tls]: common/tls.c (strings empty or NULL: not set, when a caller fills one itself) */
enum tls_min_version { TLS_MIN_V1_2, TLS_MIN_V1_3 };
struct tls_conf {
	const char *cert; /* PEM chain, leaf first (servers) */
	const char *key;  /* PEM private key for cert */
	const char *ca;   /* PEM CA bundle for verifying peers; unset: the
					     system store */
	enum tls_min_version min_version;
	const char *ciphers; /* TLS 1.2 cipher list; unset: OpenSSL's default */
};

/* [mtad] */
enum mtad_bare_lf { MTAD_BARE_LF_REJECT, MTAD_BARE_LF_NORMALIZE };
enum mtad_sender_check { MTAD_SENDER_CHECK_STRICT, MTAD_SENDER_CHECK_OFF };
enum mtad_burl_tls { MTAD_BURL_TLS_NO, MTAD_BURL_TLS_STARTTLS, MTAD_BURL_TLS_IMPLICIT };
struct mtad_conf {
	const struct conf_addrs *listen;
	const struct conf_addrs *submission;
	const struct conf_addrs *submissions;
	const struct conf_addrs *lmtp;
	const char *hostname;
	int64_t workers;
	const char *user;
	bool allow_root;
	const char *pidfile;
	int64_t max_connections;
	int64_t max_connections_per_ip;
	int64_t max_unauth_connections_per_ip;
	const struct conf_list *local_domains;
	const struct conf_cidrs *trusted_networks;
	const char *relay_host;
	const struct conf_list *transport_map;
	const char *mailhost;
	const struct conf_list *mailhost_lmtp;
	int64_t mailhost_lmtp_port;
	uint64_t max_message_size;
	uint64_t line_max;
	int64_t max_recipients_per_transaction;
	int64_t reject_recipients_per_transaction;
	int64_t max_transactions_per_session;
	int64_t max_errors;
	int64_t greeting_delay_ms;
	int64_t command_timeout_ms;
	int64_t data_timeout_ms;
	int64_t login_timeout_ms;
	int64_t max_transaction_time_ms;
	int64_t max_data_time_ms;
	bool auth_require_tls;
	enum mtad_bare_lf bare_lf;
	enum mtad_sender_check sender_login_check;
	const struct conf_list *sender_login_exempt;
	const char *sender_login_map;
	bool reject_unauth_local_sender;
	bool received_auth;
	const struct conf_list *retry_schedule; /* ms in ->ms */
	int64_t max_queue_lifetime_ms;
	int64_t relay_concurrency;
	int64_t relay_port;
	int64_t mta_sts_port;
	int64_t relay_timeout_ms;
	int64_t delay_warning_ms;
	const char *authserv_id;
	const char *postmaster;
	const char *recipient_delimiter;
	bool subaddress_folder;
	const char *aliases;
	const char *srs_secret_file;
	const char *srs_domain;
	int64_t srs_max_age;
	const struct conf_addrs *local_submission;
	const char *maildrop;
	const char *burl_imap;
	const char *burl_user;
	const char *burl_password_file;
	int64_t burl_timeout_ms;
	enum mtad_burl_tls burl_tls;
	const char *burl_tls_name;
};

/* The proxy login's keys of a section with a front role ([imapd], [sieve]; rows:
   CONF_PROXY_KEYS in conf_keys.c): common/proxy.h, imapd/imap_proxy.c, managesieve/ms_proxy.c. */
enum conf_proxy_tls { CONF_PROXY_TLS_NONE, CONF_PROXY_TLS_STARTTLS };
#define CONF_PROXY_FIELDS                       \
	bool proxy;                             \
	const struct conf_list *proxy_hosts;    \
	int64_t proxy_port;                     \
	const char *proxy_user;                 \
	const char *proxy_secret_file;          \
	const struct conf_cidrs *proxy_trusted; \
	int64_t proxy_timeout_ms;               \
	enum conf_proxy_tls proxy_tls;          \
	const char *proxy_ca_file;              \
	const char *proxy_cert_file;            \
	const char *proxy_key_file;             \
	const char *proxy_client_ca_file;       \
	bool proxy_require_tls;

/* [imapd] */
struct imapd_conf {
	const struct conf_addrs *listen;
	const struct conf_addrs *listen_tls;
	int64_t workers;
	const char *user;
	bool allow_root;
	const char *pidfile;
	const char *hostname;
	int64_t max_connections;
	int64_t max_connections_per_ip;
	int64_t max_unauth_connections_per_ip;
	int64_t max_connections_per_user;
	bool allow_plaintext_auth;
	int64_t login_timeout_ms;
	int64_t idle_timeout_ms;
	uint64_t line_max;
	uint64_t literal_max;
	uint64_t max_append_size;
	int64_t max_bad_commands;
	int64_t max_mailboxes_per_user;
	int64_t max_mailbox_depth;
	uint64_t metadata_max_size;
	int64_t metadata_max_entries;
	bool metadata_private;
	const char *metadata_admin;
	const char *metadata_comment;
	const char *namespace_other;  /* "" or a prefix ending in '/' */
	const char *namespace_shared; /* "" or a prefix ending in '/' */
	const char *shared_owner;
	const struct conf_list *urlauth_submit_users;
	CONF_PROXY_FIELDS
	int64_t proxy_pool_max;          /* front: parked store host connections, all hosts */
	int64_t proxy_pool_max_per_host; /* front: parked connections to one store host */
	int64_t proxy_pool_idle_ms;      /* front: how long one stays parked */
};

/* [sink] */
enum sink_records { SINK_RECORDS_STAMPED, SINK_RECORDS_ALL };
struct sink_conf {
	const struct conf_addrs *listen;
	const struct conf_addrs *control;
	int64_t workers;
	const char *keep;
	const char *pidfile;
	const char *user;
	const char *hostname;
	int64_t max_connections;
	uint64_t max_message_size;
	int64_t max_recipients;
	int64_t timeout_ms;
	bool starttls;
	uint64_t record_memory;
	enum sink_records records;
};

/* [dns]: libheron_dns (dns/dns.h) */
enum dns_dnssec { DNS_DNSSEC_VALIDATE, DNS_DNSSEC_TRUST_AD, DNS_DNSSEC_OFF };
struct dns_conf {
	const char *resolv_conf;
	const struct conf_list *nameservers;
	int64_t timeout_ms;
	int64_t attempts;
	enum dns_dnssec dnssec;
	const char *trust_anchor_file;
	int64_t cache_size;
};

/* [dkim], [spf], [dmarc]: sender authentication in mtad (mtad/mtad_auth.c, libheron_mailauth) */
struct dkim_conf {
	const char *sign;
	const struct conf_list *sign_headers;
	int64_t signature_ttl_ms;
	bool verify;
	int64_t min_rsa_bits;
};
struct spf_conf {
	bool verify;
	bool helo;
	bool reject_fail;
};
struct dmarc_conf {
	bool verify;
	bool reject;
	bool quarantine;
	const char *psl;
};

/* [sieve]: delivery (mtad/deliver_sieve.c), ManageSieve, mailctl sieve */
struct sieve_conf {
	const char *before;
	const char *after;
	uint64_t max_script_size;
	int64_t max_scripts;
	uint64_t max_storage;
	int64_t max_instructions;
	int64_t max_redirects;
	int64_t max_actions;
	uint64_t max_header_bytes;
	uint64_t max_body_bytes;
	const char *spam_header;
	int64_t spam_max;
	const char *virus_header;
	int64_t vacation_min_days;
	const struct conf_addrs *listen;
	int64_t workers;
	const char *user;
	bool allow_root;
	const char *pidfile;
	int64_t max_connections;
	bool allow_plaintext_auth;
	int64_t timeout_ms;
	CONF_PROXY_FIELDS
};

/* [milter]: mtad/milter.c */
enum milter_default_action {
	MILTER_DEFAULT_TEMPFAIL,
	MILTER_DEFAULT_ACCEPT,
	MILTER_DEFAULT_REJECT,
};
struct milter_conf {
	const char *smtpd_milters;
	const char *non_smtpd_milters;
	enum milter_default_action default_action;
	int64_t connect_timeout_ms;
	int64_t command_timeout_ms;
	int64_t content_timeout_ms;
};

/* [metrics]: common/obs.c (every daemon's metrics endpoint) */
struct metrics_conf {
	bool enabled;
	const struct conf_addrs *mtad_listen;
	const struct conf_addrs *imapd_listen;
	const struct conf_addrs *managesieved_listen;
	const struct conf_addrs *sink_listen;
	const struct conf_cidrs *allow;
	int64_t max_connections;
	int64_t timeout_ms;
};

/* [control]: common/obs.c (each worker's control socket), mailctl who/kick/stats --live */
struct control_conf {
	const char *dir;
};

/* [log]: common/daemon.c */
enum log_target { LOG_TARGET_SYSLOG, LOG_TARGET_STDERR, LOG_TARGET_FILE };
enum log_facility {
	LOG_FACILITY_MAIL,
	LOG_FACILITY_DAEMON,
	LOG_FACILITY_USER,
	LOG_FACILITY_LOCAL0,
	LOG_FACILITY_LOCAL1,
	LOG_FACILITY_LOCAL2,
	LOG_FACILITY_LOCAL3,
	LOG_FACILITY_LOCAL4,
	LOG_FACILITY_LOCAL5,
	LOG_FACILITY_LOCAL6,
	LOG_FACILITY_LOCAL7,
};
struct log_conf {
	enum log_target target;
	const char *file;
	enum log_level level; /* the choices are in enum log_level's order (log.h) */
	enum log_facility facility;
};

/* Every section, as conf_values() returns it. */
struct heron_conf {
	struct store_conf store;
	struct directory_conf directory;
	struct tls_conf tls;
	struct mtad_conf mtad;
	struct imapd_conf imapd;
	struct sink_conf sink;
	struct dns_conf dns;
	struct dkim_conf dkim;
	struct spf_conf spf;
	struct dmarc_conf dmarc;
	struct sieve_conf sieve;
	struct milter_conf milter;
	struct metrics_conf metrics;
	struct control_conf control;
	struct log_conf log;
};

#endif
