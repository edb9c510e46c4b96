/* cfg.c — owns the function table and the run configuration: built-in profiles, the key table
 * that profile files, the agent setup message and the report share, the server info's JSON
 * (agent results and report alike). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/str.h"
#include "mailload/json.h"
#include "mailload/mailload.h"

const struct ml_fn_def ml_fns[FN_COUNT] = {
	[FN_SMTP_CONNECT] = { "SMTP Connect", "smtp_connect", 5000, true },
	[FN_SMTP_DATA] = { "SMTP Data", "smtp_data", 5000, true },
	[FN_IMAP_APPEND] = { "IMAP APPEND", "imap_append", 5000, false },
	[FN_IMAP_CONNECT] = { "IMAP Connect", "imap_connect", 5000, false },
	[FN_IMAP_EXPUNGE] = { "IMAP EXPUNGE", "imap_expunge", 5000, false },
	[FN_IMAP_FETCH_BODY] = { "IMAP FETCH_NUM_BODYALL", "imap_fetch_body", 5000, false },
	[FN_IMAP_FETCH_HDR] = { "IMAP FETCH_RANGE_ENVELOPE_BODYPEEK_HEADERFIELDS_FLAGS_"
				"INTERNALDATE_RFC822SIZE_UID",
				"imap_fetch_hdr", 5000, false },
	[FN_IMAP_LIST] = { "IMAP LIST", "imap_list", 5000, false },
	[FN_IMAP_LSUB] = { "IMAP LSUB_NULL_WILDCARD", "imap_lsub", 5000, false },
	[FN_IMAP_SELECT_FOLDER] = { "IMAP SELECT_FOLDER", "imap_select_folder", 5000, false },
	[FN_IMAP_SELECT_INBOX] = { "IMAP SELECT_INBOX", "imap_select_inbox", 5000, false },
	[FN_IMAP_STORE_DELETED] = { "IMAP STORE_NUM_SET_FLAGS_DELETED", "imap_store_deleted", 5000,
				    false },
	[FN_IMAP_UID_STORE_DELETED] = { "IMAP UID_STORE_NUM_SET_FLAGS_DELETED",
					"imap_uid_store_deleted", 5000, false },
	[FN_IMAP_UID_FETCH_HDR] = { "IMAP UID_FETCH_RANGE_UID_BODYPEEK_HEADERFIELDS_FLAGS_"
				    "RFC822SIZE",
				    "imap_uid_fetch_hdr", 5000, false },
	[FN_IMAP_UID_STORE_SEEN] = { "IMAP UID_STORE_NUM_SET_FLAGS_SEEN", "imap_uid_store_seen",
				     5000, false },
	[FN_SMTP_EHLO] = { "SMTP EHLO", "smtp_ehlo", 5000, true },
	[FN_SMTP_STARTTLS] = { "SMTP STARTTLS", "smtp_starttls", 5000, true },
	[FN_SMTP_AUTH] = { "SMTP AUTH", "smtp_auth", 5000, true },
	[FN_SMTP_MAIL] = { "SMTP MAIL", "smtp_mail", 5000, true },
	[FN_SMTP_RCPT] = { "SMTP RCPT", "smtp_rcpt", 5000, true },
	[FN_SMTP_DATA_CMD] = { "SMTP DATA command", "smtp_data_cmd", 5000, true },
	[FN_SMTP_QUIT] = { "SMTP QUIT", "smtp_quit", 5000, true },
	[FN_IMAP_CAPABILITY] = { "IMAP CAPABILITY", "imap_capability", 5000, false },
	[FN_IMAP_STARTTLS] = { "IMAP STARTTLS", "imap_starttls", 5000, false },
	[FN_IMAP_LOGIN] = { "IMAP LOGIN", "imap_login", 5000, false },
	[FN_IMAP_LOGOUT] = { "IMAP LOGOUT", "imap_logout", 5000, false },
	[FN_IMAP_CREATE] = { "IMAP CREATE", "imap_create", 5000, false },
	[FN_IMAP_SUBSCRIBE] = { "IMAP SUBSCRIBE", "imap_subscribe", 5000, false },
	[FN_IMAP_STATUS] = { "IMAP STATUS", "imap_status", 5000, false },
	[FN_PROBE_CONNECT] = { "Probe connect", "probe_connect", 5000, false },
	[FN_PROBE_LOGIN] = { "Probe CAPABILITY, STARTTLS and LOGIN", "probe_login", 5000, false },
	[FN_PROBE_EXAMINE] = { "Probe EXAMINE INBOX", "probe_examine", 5000, false },
	[FN_PROBE_FETCH] = { "Probe look (FETCH of Message-IDs, or NOOP)", "probe_fetch", 5000,
			     false },
	[FN_PROBE_IDLE] = { "Probe IDLE (time held open)", "probe_idle", 5000, false },
	[FN_PROBE_LOGOUT] = { "Probe LOGOUT", "probe_logout", 5000, false },
	[FN_PROBE_QUEUE] = { "Probe queueing delay (250 to the probe's start)", "probe_queue",
			     5000, false },
	[FN_PROBE_READY] = { "Probe first look (250 to its first complete look)", "probe_ready",
			     5000, false },
	[FN_DELIVERY] = { "Delivery check", "delivery", ML_DELIVERY_LIMIT_MS, true },
};

int ml_fn_by_key(const char *key)
{
	for (int i = 0; i < FN_COUNT; i++)
		if (strcmp(ml_fns[i].key, key) == 0)
			return i;
	return -1;
}

#define D(f, prof, doc)                                             \
	{                                                           \
#f, CFGT_DBL, offsetof(struct ml_cfg, f), prof, doc \
	}
#define U(f, prof, doc)                                             \
	{                                                           \
#f, CFGT_U64, offsetof(struct ml_cfg, f), prof, doc \
	}
#define S(f, prof, doc)                                             \
	{                                                           \
#f, CFGT_STR, offsetof(struct ml_cfg, f), prof, doc \
	}
const struct ml_cfg_key ml_cfg_keys[] = {
	S(profile, true, "profile name"),
	D(send_per_hour, true, "messages each user submits per peak hour"),
	D(recv_per_hour, true, "messages each user receives from remote servers per hour"),
	D(imap_per_hour, true, "IMAP sessions per user per hour"),
	D(mix_check, true, "share of check sessions"),
	D(mix_sync, true, "share of sync sessions"),
	D(mix_cleanup, true, "share of cleanup sessions"),
	D(rcpt_local, true, "share of local recipients"),
	D(inbox_mean, true, "initial INBOX messages, mean"),
	D(inbox_max, true, "initial INBOX messages, maximum"),
	D(folder_mean, true, "initial messages of another folder, mean"),
	D(folder_max, true, "initial messages of another folder, maximum"),
	D(folders_mean, true, "personal folders per user, mean"),
	D(folders_max, true, "personal folders per user, maximum"),
	D(subscribed, true, "share of folders subscribed"),
	D(size_scale, true, "message size factor applied to the corporate size classes"),
	D(check_delete, true, "share of read messages a check session deletes"),
	D(rate, false, "target messages per minute"),
	U(users, false, "user population"),
	U(seed, false, "random seed"),
	U(run_id, false, "run id (in Message-IDs)"),
	U(ramp_s, false, "ramp-up seconds"),
	U(steady_s, false, "steady-state seconds"),
	U(down_s, false, "ramp-down seconds"),
	U(drain_s, false, "delivery-check drain seconds after ramp-down"),
	U(timeout_s, false, "per-step timeout seconds"),
	U(probe_max, false, "delivery probe connections per agent (0: as many as needed)"),
	U(probe_window_s, false, "seconds a probe watches for a copy after its 250"),
	U(min_samples, false, "steady-state samples a summary function needs"),
	U(reconcile_s, false, "bound of the reconciliation pass, seconds"),
	U(delivery_check, false, "0: no probes, no reconciliation (local copies unchecked)"),
	U(max_sessions, false, "open sessions per agent at most"),
	S(domain, false, "local domain"),
	S(ext_domain, false, "remote domain (relayed to the sink)"),
	S(password, false, "password of every user (empty: the login)"),
	S(user_format, false, "login of user N, printf-style (user%d)"),
	S(users_file, false, "login, password and address of each user, one a line"),
	U(tls_verify, false, "1: verify the server's certificate and name"),
	S(ca_file, false, "CA bundle for --tls-verify (empty: the system's)"),
	S(smtp_host, false, "SMTP host (inbound MTA role)"),
	S(submit_host, false, "submission host"),
	S(imap_host, false, "IMAP host"),
	U(smtp_port, false, "SMTP port"),
	U(submit_port, false, "submission port"),
	U(imap_port, false, "IMAP port"),
	S(tls, false, "none, starttls or implicit"),
	S(mode, false, "run or init"),
	U(agent, false, "agent index"),
	U(nagents, false, "agent count"),
	U(user_lo, false, "first user of this agent"),
	U(user_hi, false, "last user of this agent + 1"),
	U(t0_ms, false, "start of ramp-up, unix ms"),
};
#undef D
#undef U
#undef S
const size_t ml_cfg_nkeys = sizeof(ml_cfg_keys) / sizeof(ml_cfg_keys[0]);

int ml_cfg_defaults(struct ml_cfg *c, const char *profile)
{
	memset(c, 0, sizeof(*c));
	c->send_per_hour = 0.30;
	c->recv_per_hour = 0.60;
	c->imap_per_hour = 4.8;
	c->mix_check = 0.70;
	c->mix_sync = 0.20;
	c->mix_cleanup = 0.10;
	c->rcpt_local = 0.70;
	c->inbox_mean = 40;
	c->inbox_max = 200;
	c->folder_mean = 15;
	c->folder_max = 100;
	c->folders_mean = 4;
	c->folders_max = 12;
	c->subscribed = 0.90;
	c->check_delete = 0.30;
	c->rate = 60;
	c->seed = 1;
	c->ramp_s = 300;
	c->steady_s = 1800;
	c->down_s = 120;
	c->drain_s = 60;
	c->timeout_s = 60;
	c->probe_max = 0;
	c->probe_window_s = 2 * ML_DELIVERY_LIMIT_MS / 1000;
	c->min_samples = ML_MIN_SAMPLES;
	c->reconcile_s = 120;
	c->delivery_check = 1;
	c->max_sessions = 20000;
	str_lcpy(c->domain, "heron.test", ML_STR);
	str_lcpy(c->ext_domain, "ext.heron.test", ML_STR);
	str_lcpy(c->smtp_host, "127.0.0.1", ML_STR);
	str_lcpy(c->submit_host, "127.0.0.1", ML_STR);
	str_lcpy(c->imap_host, "127.0.0.1", ML_STR);
	c->smtp_port = 25;
	c->submit_port = 587;
	c->imap_port = 143;
	str_lcpy(c->tls, "none", ML_STR);
	str_lcpy(c->user_format, "user%d", ML_STR);
	str_lcpy(c->mode, "run", ML_STR);
	c->nagents = 1;
	str_lcpy(c->profile, profile, ML_STR);
	if (strcmp(profile, "corporate") == 0) {
		c->size_scale = 1.0;
	} else if (strcmp(profile, "small") == 0) {
		c->size_scale = 0.122; /* corporate mean ~65.6 KB -> ~8 KB */
	} else if (strcmp(profile, "tiny") == 0) {
		c->size_scale = 0.061;
		c->inbox_mean = 10;
		c->inbox_max = 50;
		c->folder_mean = 3;
		c->folder_max = 20;
	} else {
		return -1;
	}
	return 0;
}

int ml_cfg_set(struct ml_cfg *c, const char *key, const char *val, const char **error_r)
{
	for (size_t i = 0; i < ml_cfg_nkeys; i++) {
		const struct ml_cfg_key *k = &ml_cfg_keys[i];
		char *f = (char *)c + k->off;
		char *end;

		if (strcmp(k->name, key) != 0)
			continue;
		switch (k->type) {
		case CFGT_DBL:
			errno = 0;
			*(double *)(void *)f = strtod(val, &end);
			if (errno != 0 || end == val || *end != '\0') {
				*error_r = "not a number";
				return -1;
			}
			return 0;
		case CFGT_U64:
			if (str_to_u64(val, strlen(val), UINT64_MAX, (uint64_t *)(void *)f) < 0) {
				*error_r = "not an unsigned integer";
				return -1;
			}
			return 0;
		case CFGT_STR:
			if (str_lcpy(f, val, ML_STR) >= ML_STR) {
				*error_r = "too long";
				return -1;
			}
			return 0;
		}
	}
	*error_r = "unknown key";
	return -1;
}

int ml_cfg_load(struct ml_cfg *c, const char *path, char *err, size_t errlen)
{
	FILE *fp = fopen(path, "r");
	char line[512];
	int lineno = 0;

	if (fp == NULL) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), fp) != NULL) {
		struct str_view v = str_trim(str_view_of(line)), k, val;
		const char *e;
		char kb[64], vb[ML_STR];

		lineno++;
		if (v.len == 0 || v.p[0] == '#')
			continue;
		const char *eq = memchr(v.p, '=', v.len);
		if (eq == NULL)
			goto bad;
		k = str_trim((struct str_view){ v.p, (size_t)(eq - v.p) });
		val = str_trim((struct str_view){ eq + 1, v.len - (size_t)(eq - v.p) - 1 });
		if (k.len >= sizeof(kb) || val.len >= sizeof(vb))
			goto bad;
		memcpy(kb, k.p, k.len);
		kb[k.len] = '\0';
		memcpy(vb, val.p, val.len);
		vb[val.len] = '\0';
		if (strcmp(kb, "base") == 0) {
			char keep[ML_STR];
			str_lcpy(keep, vb, sizeof(keep));
			if (ml_cfg_defaults(c, keep) < 0)
				goto bad;
			continue;
		}
		if (ml_cfg_set(c, kb, vb, &e) < 0) {
			snprintf(err, errlen, "%s:%d: %s: %s", path, lineno, kb, e);
			fclose(fp);
			return -1;
		}
	}
	fclose(fp);
	return 0;
bad:
	snprintf(err, errlen, "%s:%d: expected key = value", path, lineno);
	fclose(fp);
	return -1;
}

void ml_cfg_json(const struct ml_cfg *c, struct buf *out)
{
	for (size_t i = 0; i < ml_cfg_nkeys; i++) {
		const struct ml_cfg_key *k = &ml_cfg_keys[i];
		const char *f = (const char *)c + k->off;

		if (i > 0)
			buf_putc(out, ',');
		json_put_str(out, k->name);
		buf_putc(out, ':');
		switch (k->type) {
		case CFGT_DBL:
			buf_printf(out, "%.17g", *(const double *)(const void *)f);
			break;
		case CFGT_U64:
			buf_printf(out, "%" PRIu64, *(const uint64_t *)(const void *)f);
			break;
		case CFGT_STR:
			json_put_str(out, f);
			break;
		}
	}
}

int ml_cfg_from_json(struct ml_cfg *c, const struct jv *obj)
{
	for (size_t i = 0; i < ml_cfg_nkeys; i++) {
		const struct ml_cfg_key *k = &ml_cfg_keys[i];
		const struct jv *v = jv_get(obj, k->name);
		char *f = (char *)c + k->off;

		if (v == NULL)
			continue;
		switch (k->type) {
		case CFGT_DBL:
			if (v->type != JV_NUM)
				return -1;
			*(double *)(void *)f = v->num;
			break;
		case CFGT_U64:
			if (v->type != JV_NUM || v->num < 0)
				return -1;
			*(uint64_t *)(void *)f = (uint64_t)v->i;
			break;
		case CFGT_STR:
			if (v->type != JV_STR || str_lcpy(f, v->s, ML_STR) >= ML_STR)
				return -1;
			break;
		}
	}
	return 0;
}

void ml_server_info_json(const struct ml_server_info *s, struct buf *out)
{
	buf_puts(out, "\"server\":{\"smtp_greeting\":");
	json_put_str(out, s->smtp_greeting);
	buf_puts(out, ",\"imap_greeting\":");
	json_put_str(out, s->imap_greeting);
	buf_puts(out, ",\"imap_capability\":");
	json_put_str(out, s->imap_caps);
	buf_puts(out, ",\"imap_id\":");
	json_put_str(out, s->imap_id);
	buf_printf(out,
		   "},\"tls\":{\"smtp\":%" PRIu64 ",\"imap\":%" PRIu64 ",\"smtp_failed\":%" PRIu64
		   ",\"imap_failed\":%" PRIu64 ",\"protocol\":",
		   s->tls_ok[0], s->tls_ok[1], s->tls_fail[0], s->tls_fail[1]);
	json_put_str(out, s->tls_proto);
	buf_puts(out, ",\"cipher\":");
	json_put_str(out, s->tls_cipher);
	buf_putc(out, '}');
}

static void merge_text(char *dst, size_t size, const struct jv *o, const char *key)
{
	if (dst[0] == '\0')
		str_lcpy(dst, jv_str(o, key, ""), size);
}

void ml_server_info_merge(struct ml_server_info *s, const struct jv *r)
{
	const struct jv *srv = jv_get(r, "server"), *t = jv_get(r, "tls");

	merge_text(s->smtp_greeting, sizeof(s->smtp_greeting), srv, "smtp_greeting");
	merge_text(s->imap_greeting, sizeof(s->imap_greeting), srv, "imap_greeting");
	merge_text(s->imap_caps, sizeof(s->imap_caps), srv, "imap_capability");
	merge_text(s->imap_id, sizeof(s->imap_id), srv, "imap_id");
	if (t == NULL)
		return;
	s->tls_ok[0] += (uint64_t)jv_int(t, "smtp", 0);
	s->tls_ok[1] += (uint64_t)jv_int(t, "imap", 0);
	s->tls_fail[0] += (uint64_t)jv_int(t, "smtp_failed", 0);
	s->tls_fail[1] += (uint64_t)jv_int(t, "imap_failed", 0);
	if (s->tls_proto[0] == '\0') {
		str_lcpy(s->tls_proto, jv_str(t, "protocol", ""), sizeof(s->tls_proto));
		str_lcpy(s->tls_cipher, jv_str(t, "cipher", ""), sizeof(s->tls_cipher));
	}
}

void ml_wilson(uint64_t k, uint64_t n, double *lo_pct, double *hi_pct)
{
	const double z = ML_CI_Z, z2 = z * z;

	if (n == 0) {
		*lo_pct = 0;
		*hi_pct = 100;
		return;
	}
	double p = (double)k / (double)n, nn = (double)n;
	double mid = (p + z2 / (2 * nn)) / (1 + z2 / nn);
	double half = z / (1 + z2 / nn) * sqrt(p * (1 - p) / nn + z2 / (4 * nn * nn));
	*lo_pct = 100.0 * (mid - half < 0 ? 0 : mid - half);
	*hi_pct = 100.0 * (mid + half > 1 ? 1 : mid + half);
}

void ml_host_json(struct buf *o)
{
	char model[160] = "unknown", line[256], host[256] = "unknown", k[400];
	uint64_t mem_kb = 0;
	struct utsname u;
	FILE *fp;

	if ((fp = fopen("/proc/cpuinfo", "r")) != NULL) {
		while (fgets(line, sizeof(line), fp) != NULL)
			if (strncmp(line, "model name", 10) == 0) {
				char *c = strchr(line, ':');
				if (c != NULL) {
					str_lcpy(model, c + 2, sizeof(model));
					model[strcspn(model, "\n")] = '\0';
				}
				break;
			}
		fclose(fp);
	}
	if ((fp = fopen("/proc/meminfo", "r")) != NULL) {
		if (fscanf(fp, "MemTotal: %" SCNu64, &mem_kb) != 1)
			mem_kb = 0;
		fclose(fp);
	}
	if (gethostname(host, sizeof(host)) < 0)
		str_lcpy(host, "unknown", sizeof(host));
	host[sizeof(host) - 1] = '\0';
	uname(&u);
	buf_puts(o, "\"name\":");
	json_put_str(o, host);
	buf_puts(o, ",\"cpu\":");
	json_put_str(o, model);
	buf_printf(o, ",\"cores\":%ld,\"mem_kb\":%" PRIu64 ",\"kernel\":",
		   sysconf(_SC_NPROCESSORS_ONLN), mem_kb);
	snprintf(k, sizeof(k), "%s %s %s", u.sysname, u.release, u.machine);
	json_put_str(o, k);
}
