/* tls.c — owns OpenSSL use: contexts from [tls], TLS bufferevents (implicit and STARTTLS, both
 * sides), peer info and errors, channel binding data (RFC 9266, RFC 5929), and the
 * self-signed certificate maker. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "common/conf.h"
#include "common/log.h"
#include "common/tls.h"
#include "common/xmalloc.h"

static char *ssl_errorf(const char *what, const char *arg);
static int ctx_common(SSL_CTX *ctx, const struct tls_conf *t, char **error_r);
static struct bufferevent *tls_filter(struct bufferevent *plain, SSL *ssl,
				      enum bufferevent_ssl_state state, size_t *dropped_r);

#define TLS_SID_CTX "heron"
#define TLS_TICKET_KEYS 80 /* OpenSSL's ticket key name, HMAC and AES keys: 16 + 32 + 32 */

static bool set(const char *s)
{
	return s != NULL && s[0] != '\0';
}

/* "what arg: <the last OpenSSL reason>"; drains OpenSSL's error queue. */
static char *ssl_errorf(const char *what, const char *arg)
{
	unsigned long e, last = 0;
	char reason[256] = "unknown error";

	while ((e = ERR_get_error()) != 0)
		last = e;
	if (last != 0)
		ERR_error_string_n(last, reason, sizeof(reason));
	return xasprintf("%s%s%s: %s", what, set(arg) ? " " : "", set(arg) ? arg : "", reason);
}

/* Version floor, options, ciphers and (when both are set) the certificate and key. */
static int ctx_common(SSL_CTX *ctx, const struct tls_conf *t, char **error_r)
{
	SSL_CTX_set_min_proto_version(ctx, t->min_version == TLS_MIN_V1_3 ? TLS1_3_VERSION
									  : TLS1_2_VERSION);
	SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
					 SSL_OP_CIPHER_SERVER_PREFERENCE);
	SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
	if (set(t->ciphers) && SSL_CTX_set_cipher_list(ctx, t->ciphers) != 1) {
		*error_r = ssl_errorf("tls ciphers", t->ciphers);
		return -1;
	}
	if (!set(t->cert) || !set(t->key))
		return 0;
	if (SSL_CTX_use_certificate_chain_file(ctx, t->cert) != 1) {
		*error_r = ssl_errorf("tls cert", t->cert);
		return -1;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, t->key, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_check_private_key(ctx) != 1) {
		*error_r = ssl_errorf("tls key", t->key);
		return -1;
	}
	return 0;
}

SSL_CTX *tls_server_ctx_new(const struct tls_conf *t, char **error_r)
{
	SSL_CTX *ctx;

	*error_r = NULL;
	if (!set(t->cert) || !set(t->key)) {
		*error_r = xstrdup("tls: a server needs both cert and key");
		return NULL;
	}
	if ((ctx = SSL_CTX_new(TLS_server_method())) == NULL) {
		*error_r = ssl_errorf("SSL_CTX_new", NULL);
		return NULL;
	}
	if (ctx_common(ctx, t, error_r) == -1) {
		SSL_CTX_free(ctx);
		return NULL;
	}
	/* Resumption (session IDs and tickets, OpenSSL's defaults) needs a session id context
	   once client certificates are asked for; the same one for every context of the
	   process, so that a ticket outlives a SIGHUP's new context (tls_server_ctx_reload). */
	if (SSL_CTX_set_session_id_context(ctx, (const unsigned char *)TLS_SID_CTX,
					   sizeof(TLS_SID_CTX) - 1) != 1) {
		*error_r = ssl_errorf("tls session id context", NULL);
		SSL_CTX_free(ctx);
		return NULL;
	}
	return ctx;
}

SSL_CTX *tls_client_ctx_new(const struct tls_conf *t, enum tls_verify verify, char **error_r)
{
	SSL_CTX *ctx;
	int ok;

	*error_r = NULL;
	if ((ctx = SSL_CTX_new(TLS_client_method())) == NULL) {
		*error_r = ssl_errorf("SSL_CTX_new", NULL);
		return NULL;
	}
	if (ctx_common(ctx, t, error_r) == -1) {
		SSL_CTX_free(ctx);
		return NULL;
	}
	/* Trust anchors are loaded either way: peer info then says whether the peer verified. */
	ok = set(t->ca) ? SSL_CTX_load_verify_locations(ctx, t->ca, NULL)
			: SSL_CTX_set_default_verify_paths(ctx);
	if (ok != 1) {
		*error_r = ssl_errorf("tls ca", set(t->ca) ? t->ca : "(system store)");
		SSL_CTX_free(ctx);
		return NULL;
	}
	SSL_CTX_set_verify(ctx, verify == TLS_VERIFY_PEER ? SSL_VERIFY_PEER : SSL_VERIFY_NONE,
			   NULL);
	return ctx;
}

void tls_ctx_free(SSL_CTX **ctxp)
{
	SSL_CTX_free(*ctxp);
	*ctxp = NULL;
}

/* The session ticket keys of old (if any) into ctx: a ticket issued before a reload, or by
   another worker (the master's context is made before the fork, a worker's again at its
   SIGHUP), still resumes. */
static void tls_ticket_keys_keep(SSL_CTX *ctx, SSL_CTX *old)
{
	unsigned char keys[TLS_TICKET_KEYS];

	if (old != NULL && SSL_CTX_get_tlsext_ticket_keys(old, keys, sizeof(keys)) == 1)
		SSL_CTX_set_tlsext_ticket_keys(ctx, keys, sizeof(keys));
	OPENSSL_cleanse(keys, sizeof(keys));
}

bool tls_server_ctx_reload(SSL_CTX **ctxp, const struct conf *new, const char *who)
{
	const struct tls_conf *tc = &conf_values(new)->tls;
	SSL_CTX *ctx;
	char *error = NULL;

	if (!set(tc->cert)) {
		if (*ctxp != NULL)
			log_warnx("%s: [tls] cert removed: TLS stays on until a restart", who);
		return false;
	}
	/* Built again even when the paths are the same: a renewed certificate is a new file
	   under the old name (certbot, acme.sh). */
	if ((ctx = tls_server_ctx_new(tc, &error)) == NULL) {
		log_warnx("%s: [tls] reload failed, the old certificate stays: %s", who, error);
		free(error);
		return false;
	}
	tls_ticket_keys_keep(ctx, *ctxp);
	tls_ctx_free(ctxp);
	*ctxp = ctx;
	log_info("%s: TLS certificate reloaded for new connections", who);
	return true;
}

struct bufferevent *tls_server_accept(struct event_base *base, SSL_CTX *ctx, int fd)
{
	SSL *ssl = SSL_new(ctx);
	struct bufferevent *bev;

	if (ssl == NULL) {
		close(fd);
		return NULL;
	}
	bev = bufferevent_openssl_socket_new(base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
					     BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	if (bev == NULL)
		fatalx("bufferevent_openssl_socket_new failed");
	/* Many clients close without close_notify: treat that as EOF, not an error. */
	bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	return bev;
}

/* A TLS filter over plain (which it then owns), after dropping plain's unread input. */
static struct bufferevent *tls_filter(struct bufferevent *plain, SSL *ssl,
				      enum bufferevent_ssl_state state, size_t *dropped_r)
{
	struct evbuffer *in = bufferevent_get_input(plain);
	struct bufferevent *bev;
	size_t n = evbuffer_get_length(in);

	evbuffer_drain(in, n);
	if (dropped_r != NULL)
		*dropped_r = n;
	bufferevent_set_timeouts(plain, NULL, NULL);
	bev = bufferevent_openssl_filter_new(bufferevent_get_base(plain), plain, ssl, state,
					     BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	if (bev == NULL)
		fatalx("bufferevent_openssl_filter_new failed");
	bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	return bev;
}

struct bufferevent *tls_starttls_server(struct bufferevent *plain, SSL_CTX *ctx, size_t *dropped_r)
{
	SSL *ssl = SSL_new(ctx);

	if (ssl == NULL)
		return NULL;
	return tls_filter(plain, ssl, BUFFEREVENT_SSL_ACCEPTING, dropped_r);
}

SSL *tls_client_ssl_new(SSL_CTX *ctx, const char *host)
{
	SSL *ssl = SSL_new(ctx);
	unsigned char ip[16];
	bool is_ip;

	if (ssl == NULL)
		return NULL;
	if (set(host)) {
		is_ip = inet_pton(AF_INET, host, ip) == 1 || inet_pton(AF_INET6, host, ip) == 1;
		/* SNI carries names only (RFC 6066 section 3). */
		/* The SNI macro casts away const: hand it a copy. */
		char sni[256];
		if ((!is_ip &&
		     (strlen(host) >= sizeof(sni) || (memcpy(sni, host, strlen(host) + 1),
						      SSL_set_tlsext_host_name(ssl, sni) != 1))) ||
		    (is_ip && X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host) != 1) ||
		    (!is_ip && SSL_set1_host(ssl, host) != 1)) {
			SSL_free(ssl);
			return NULL;
		}
	}
	return ssl;
}

struct bufferevent *tls_starttls_client(struct bufferevent *plain, SSL_CTX *ctx, const char *host,
					size_t *dropped_r)
{
	SSL *ssl = tls_client_ssl_new(ctx, host);

	return ssl != NULL ? tls_filter(plain, ssl, BUFFEREVENT_SSL_CONNECTING, dropped_r) : NULL;
}

struct bufferevent *tls_starttls_client_ssl(struct bufferevent *plain, SSL *ssl, size_t *dropped_r)
{
	return tls_filter(plain, ssl, BUFFEREVENT_SSL_CONNECTING, dropped_r);
}

void tls_peer_info(struct bufferevent *bev, const char **proto_r, const char **cipher_r,
		   int *bits_r)
{
	SSL *ssl = bufferevent_openssl_get_ssl(bev);
	bool done = ssl != NULL && SSL_is_init_finished(ssl);

	if (proto_r != NULL)
		*proto_r = done ? SSL_get_version(ssl) : NULL;
	if (cipher_r != NULL)
		*cipher_r = done ? SSL_get_cipher_name(ssl) : NULL;
	if (bits_r != NULL)
		*bits_r = done ? SSL_get_cipher_bits(ssl, NULL) : 0;
}

bool tls_peer_verified(struct bufferevent *bev)
{
	SSL *ssl = bufferevent_openssl_get_ssl(bev);

	return ssl != NULL && SSL_is_init_finished(ssl) &&
	       SSL_get0_peer_certificate(ssl) != NULL && SSL_get_verify_result(ssl) == X509_V_OK;
}

bool tls_has_exporter(struct bufferevent *bev)
{
	SSL *ssl = bufferevent_openssl_get_ssl(bev);

	return ssl != NULL && SSL_is_init_finished(ssl) && SSL_version(ssl) == TLS1_3_VERSION;
}

bool tls_channel_binding(struct bufferevent *bev, enum tls_cb_type type, unsigned char *out,
			 size_t size, size_t *len_r)
{
	static const char label[] = "EXPORTER-Channel-Binding";
	SSL *ssl = bufferevent_openssl_get_ssl(bev);
	X509 *cert;
	const EVP_MD *md;
	int md_nid = NID_undef;
	unsigned int n = 0;

	*len_r = 0;
	if (ssl == NULL || !SSL_is_init_finished(ssl) || size < EVP_MAX_MD_SIZE)
		return false;
	if (type == TLS_CB_EXPORTER) {
		/* RFC 9266 section 2: TLS 1.3 only; 32 bytes, no context */
		if (SSL_version(ssl) != TLS1_3_VERSION ||
		    SSL_export_keying_material(ssl, out, 32, label, sizeof(label) - 1, NULL, 0,
					       0) != 1)
			return false;
		*len_r = 32;
		return true;
	}
	if ((cert = SSL_get_certificate(ssl)) == NULL ||
	    OBJ_find_sigid_algs(X509_get_signature_nid(cert), &md_nid, NULL) != 1)
		return false;
	/* RFC 5929 4.1: MD5 and SHA-1 are replaced by SHA-256 */
	if (md_nid == NID_md5 || md_nid == NID_sha1)
		md_nid = NID_sha256;
	if ((md = EVP_get_digestbynid(md_nid)) == NULL || X509_digest(cert, md, out, &n) != 1)
		return false;
	*len_r = n;
	return true;
}

bool tls_is_tls(struct bufferevent *bev)
{
	return bufferevent_openssl_get_ssl(bev) != NULL;
}

const char *tls_error(struct bufferevent *bev, char *out, size_t size)
{
	SSL *ssl = bufferevent_openssl_get_ssl(bev);
	unsigned long e, last = 0;
	long vr;

	if (size == 0)
		return out;
	out[0] = '\0';
	while ((e = bufferevent_get_openssl_error(bev)) != 0)
		last = e;
	if (ssl != NULL && (vr = SSL_get_verify_result(ssl)) != X509_V_OK)
		snprintf(out, size, "certificate verify failed: %s",
			 X509_verify_cert_error_string(vr));
	else if (last != 0)
		ERR_error_string_n(last, out, size);
	return out;
}

/* ---- self-signed certificates ---- */

static X509 *selfsigned_make(EVP_PKEY *pkey, const char *cn, int days)
{
	X509 *x = X509_new();
	X509_NAME *name;
	X509V3_CTX v3;
	X509_EXTENSION *ext;
	BIGNUM *serial = BN_new();
	char *san = xasprintf("DNS:%s,IP:127.0.0.1,IP:::1", cn);
	bool ok;

	ok = x != NULL && serial != NULL && X509_set_version(x, 2) == 1 &&
	     BN_rand(serial, 63, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) == 1 &&
	     BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(x)) != NULL &&
	     X509_gmtime_adj(X509_getm_notBefore(x), -3600) != NULL &&
	     X509_gmtime_adj(X509_getm_notAfter(x), (long)days * 86400) != NULL &&
	     X509_set_pubkey(x, pkey) == 1 && (name = X509_get_subject_name(x)) != NULL &&
	     X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1,
					-1, 0) == 1 &&
	     X509_set_issuer_name(x, name) == 1;
	if (ok) {
		X509V3_set_ctx_nodb(&v3);
		X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
		ext = X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name, san);
		ok = ext != NULL && X509_add_ext(x, ext, -1) == 1;
		X509_EXTENSION_free(ext);
	}
	ok = ok && X509_sign(x, pkey, EVP_sha256()) > 0;
	BN_free(serial);
	free(san);
	if (!ok) {
		X509_free(x);
		return NULL;
	}
	return x;
}

/* Writes one PEM object to path via a temporary file and rename. */
static int pem_write(const char *path, mode_t mode, X509 *x, EVP_PKEY *pkey, char **error_r)
{
	char *tmp = xasprintf("%s.tmp.%ld", path, (long)getpid());
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	FILE *f = fd == -1 ? NULL : fdopen(fd, "w");
	bool ok;

	if (f == NULL) {
		*error_r = xasprintf("%s: %s", tmp, strerror(errno));
		if (fd != -1)
			close(fd);
		free(tmp);
		return -1;
	}
	ok = x != NULL ? PEM_write_X509(f, x) == 1
		       : PEM_write_PrivateKey(f, pkey, NULL, NULL, 0, NULL, NULL) == 1;
	ok = fflush(f) == 0 && ok;
	ok = fsync(fileno(f)) == 0 && ok;
	ok = fclose(f) == 0 && ok;
	if (!ok || rename(tmp, path) == -1) {
		*error_r = xasprintf("%s: %s", path, ok ? strerror(errno) : "write failed");
		unlink(tmp);
		free(tmp);
		return -1;
	}
	free(tmp);
	return 0;
}

int tls_selfsigned_write(const char *cert_path, const char *key_path, const char *cn, int days,
			 char **error_r)
{
	EVP_PKEY *pkey = EVP_EC_gen("P-256");
	X509 *x = NULL;
	int rc = -1;

	*error_r = NULL;
	if (pkey == NULL || (x = selfsigned_make(pkey, cn, days)) == NULL) {
		*error_r = ssl_errorf("self-signed certificate for", cn);
		goto out;
	}
	if (pem_write(key_path, 0600, NULL, pkey, error_r) == 0 &&
	    pem_write(cert_path, 0644, x, NULL, error_r) == 0)
		rc = 0;
out:
	X509_free(x);
	EVP_PKEY_free(pkey);
	return rc;
}
