/* mailctl_pw.c — owns passwords in mailctl: `pw` (a hash of the scheme the directory
 * expects, for userPassword or the users file), reading a password (prompted twice without
 * echo on a terminal, else one line of standard input), and the login `user add --password`
 * writes into the users file of backend = file: the whole file written anew next to it and
 * renamed over it, under a lock, so readers (the daemons load it again when it changes)
 * never see half a file. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "common/conf.h"
#include "common/str.h"
#include "common/xmalloc.h"
#include "ldapauth/ldapauth.h"
#include "mailctl/mailctl.h"

#define PW_MAX 1024
#define USERS_FILE_MAX (256u << 20)

/* The scheme to use: --scheme, else [directory] password_scheme (auto: by backend). */
static const char *scheme_of(const struct mc *mc, const char *given)
{
	static const char *const names[] = {
		[DIRECTORY_PW_SSHA] = "SSHA",       [DIRECTORY_PW_SSHA256] = "SSHA256",
		[DIRECTORY_PW_SSHA512] = "SSHA512", [DIRECTORY_PW_CRYPT] = "CRYPT",
		[DIRECTORY_PW_ARGON2] = "ARGON2",   [DIRECTORY_PW_SCRAM_SHA_256] = "SCRAM-SHA-256",
	};
	const struct directory_conf *d = &conf_values(mc->conf)->directory;

	if (given != NULL)
		return given;
	if (d->password_scheme != DIRECTORY_PW_AUTO)
		return names[d->password_scheme];
	return d->backend == DIRECTORY_BACKEND_FILE ? "SSHA512" : "SSHA";
}

/* Whether ldapauth_passwd_hash makes scheme (any case): a refusal of a scheme it makes is a
   refusal of the password, not of the name. */
static bool scheme_known(const char *scheme)
{
	for (size_t i = 0; ldapauth_passwd_schemes[i] != NULL; i++)
		if (strcasecmp(ldapauth_passwd_schemes[i], scheme) == 0)
			return true;
	return false;
}

/* One line of fd without its newline into buf; -1 at EOF before any byte or on a line too
   long. */
static int read_line(FILE *f, char *buf, size_t size)
{
	size_t n;

	if (fgets(buf, (int)size, f) == NULL)
		return -1;
	n = strlen(buf);
	if (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	else if (!feof(f))
		return -1;
	if (n > 0 && buf[n - 1] == '\r')
		buf[--n] = '\0';
	return 0;
}

static int prompt(const char *what, char *buf, size_t size)
{
	struct termios old, quiet;
	int rc;

	fprintf(stderr, "%s", what);
	fflush(stderr);
	if (tcgetattr(STDIN_FILENO, &old) < 0)
		return -1;
	quiet = old;
	quiet.c_lflag &= ~(tcflag_t)ECHO;
	tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
	rc = read_line(stdin, buf, size);
	tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
	fputc('\n', stderr);
	return rc;
}

/* The password: typed twice on a terminal, else the first line of stdin. */
static int get_password(struct mc *mc, char *pw, size_t size)
{
	char again[PW_MAX];
	int rc = MC_OK;

	if (isatty(STDIN_FILENO)) {
		if (prompt("Password: ", pw, size) < 0 ||
		    prompt("Again: ", again, sizeof(again)) < 0)
			rc = mc_usage(mc, "no password read");
		else if (strcmp(pw, again) != 0)
			rc = mc_usage(mc, "the two passwords differ");
		OPENSSL_cleanse(again, sizeof(again));
	} else if (read_line(stdin, pw, size) < 0) {
		rc = mc_usage(mc, "no password on standard input (one line, at most %zu bytes)",
			      size - 1);
	}
	if (rc == MC_OK && pw[0] == '\0')
		rc = mc_usage(mc, "an empty password");
	if (rc == MC_OK && !str_is_safe_line(pw, strlen(pw)))
		rc = mc_usage(mc, "the password holds control characters");
	return rc;
}

/* The hash of a password read as get_password does, in *hash_r (malloc'd). */
int mc_pw_read_hash(struct mc *mc, const char *scheme, char **hash_r)
{
	char pw[PW_MAX];
	const char *err;
	int rc;

	*hash_r = NULL;
	if ((rc = get_password(mc, pw, sizeof(pw))) != MC_OK) {
		OPENSSL_cleanse(pw, sizeof(pw));
		return rc;
	}
	*hash_r = ldapauth_passwd_hash(scheme_of(mc, scheme), pw, &err);
	OPENSSL_cleanse(pw, sizeof(pw));
	if (*hash_r == NULL && !scheme_known(scheme_of(mc, scheme)))
		return mc_usage(mc,
				"--scheme %s: %s (one of SSHA SSHA256 SSHA512 CRYPT ARGON2 "
				"SCRAM-SHA-256)",
				scheme_of(mc, scheme), err);
	if (*hash_r == NULL) /* the scheme is right: the password is what it refused */
		return mc_refuse(mc, MC_USAGE, NULL, "a %s hash of this password: %s",
				 scheme_of(mc, scheme), err);
	return MC_OK;
}

int mc_pw(struct mc *mc, const struct mc_args *a)
{
	char *hash;
	int rc = mc_pw_read_hash(mc, a->set[0] ? a->val[0] : NULL, &hash);

	if (rc != MC_OK)
		return rc;
	if (mc->json) {
		fputs("{\"scheme\": ", stdout);
		mc_json_str(stdout, hash + 1, strcspn(hash + 1, "}"));
		fputs(", \"hash\": ", stdout);
		mc_json_str(stdout, hash, strlen(hash));
		puts("}");
	} else {
		puts(hash);
	}
	free(hash);
	return MC_OK;
}

/* ---- the users file ---- */

struct users_edit {
	const char *path;
	char tmp[4200];
	int lock_fd;
	int tmp_fd;
};

/* Whether the users file text holds a line for user (its first field, ASCII case). */
static bool has_user(const char *text, size_t len, const char *user)
{
	size_t ulen = strlen(user);

	for (const char *p = text, *end = text + len; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t ll = nl != NULL ? (size_t)(nl - p) : (size_t)(end - p);
		const char *colon = memchr(p, ':', ll);

		if (p[0] != '#' && colon != NULL && (size_t)(colon - p) == ulen &&
		    strncasecmp(p, user, ulen) == 0)
			return true;
		p += ll + 1;
	}
	return false;
}

static int read_all(int fd, struct buf *b)
{
	char chunk[65536];
	ssize_t n;

	while ((n = read(fd, chunk, sizeof(chunk))) > 0)
		if (buf_append(b, chunk, (size_t)n) < 0)
			return -1;
	return n < 0 ? -1 : 0;
}

void mc_users_edit_abort(struct users_edit **ep)
{
	struct users_edit *e = *ep;

	if (e == NULL)
		return;
	if (e->tmp_fd != -1) {
		close(e->tmp_fd);
		unlink(e->tmp);
	}
	if (e->lock_fd != -1)
		close(e->lock_fd);
	free(e);
	*ep = NULL;
}

/* Prepares the users file with line added (locked, written to a temporary file, not yet in
   place): MC_OK and *e_r, or the exit code after saying why (nothing changed). */
int mc_users_edit_add(struct mc *mc, const char *user, const char *line, struct users_edit **e_r)
{
	const struct directory_conf *d = &conf_values(mc->conf)->directory;
	struct users_edit *e = xcalloc(1, sizeof(*e));
	struct buf text;
	struct stat st;
	int rc = MC_OK;

	*e_r = NULL;
	e->path = d->users_file;
	e->tmp_fd = -1;
	buf_init(&text, 4096, USERS_FILE_MAX);
	snprintf(e->tmp, sizeof(e->tmp), "%s.mailctl-new", e->path);
	/* lock the file; another mailctl may have renamed a new one over it meanwhile: then
	   lock that one */
	for (int tries = 0; tries < 100; tries++) {
		struct stat now;

		if ((e->lock_fd = open(e->path, O_RDONLY | O_CLOEXEC)) == -1 ||
		    flock(e->lock_fd, LOCK_EX) == -1 || fstat(e->lock_fd, &st) == -1 ||
		    stat(e->path, &now) == -1 || now.st_ino == st.st_ino)
			break;
		close(e->lock_fd);
		e->lock_fd = -1;
	}
	if (e->lock_fd == -1 && errno != ENOENT) {
		rc = mc_refuse(mc, MC_NOINPUT, "check [directory] users_file",
			       "users file %s ([directory] users_file): %s", e->path,
			       strerror(errno));
	} else if (e->lock_fd != -1 && read_all(e->lock_fd, &text) < 0) {
		rc = mc_refuse(mc, MC_IOERR, "check the users file", "reading %s: %s", e->path,
			       strerror(errno));
	} else if (has_user(text.data, text.len, user)) {
		rc = mc_refuse(mc, MC_REFUSED, "change its line there or remove it first",
			       "user '%s' is in %s already", user, e->path);
	} else if ((e->tmp_fd = open(e->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
				     e->lock_fd != -1 ? st.st_mode & 07777 : 0640)) == -1) {
		int err = errno;

		rc = mc_refuse(mc, err == EACCES ? MC_NOPERM : MC_CANTCREAT,
			       "run as the users file's owner", "cannot write next to %s (%s): %s",
			       e->path, e->tmp, strerror(err));
	}
	if (rc == MC_OK) {
		if (text.len > 0 && text.data[text.len - 1] != '\n')
			buf_putc(&text, '\n');
		if (buf_printf(&text, "%s\n", line) < 0 ||
		    write(e->tmp_fd, text.data, text.len) != (ssize_t)text.len ||
		    fsync(e->tmp_fd) == -1) {
			rc = mc_refuse(mc, MC_IOERR, "check the file system", "writing %s: %s",
				       e->tmp, strerror(errno));
		}
	}
	OPENSSL_cleanse(text.data, text.cap);
	buf_release(&text);
	if (rc != MC_OK) {
		mc_users_edit_abort(&e);
		return rc;
	}
	*e_r = e;
	return MC_OK;
}

/* Puts the prepared file in place (rename, directory sync) and releases the lock. */
int mc_users_edit_commit(struct mc *mc, struct users_edit **ep)
{
	struct users_edit *e = *ep;
	char *dir = xstrdup(e->path), *slash = strrchr(dir, '/');
	int dfd, rc = MC_OK;

	if (rename(e->tmp, e->path) == -1) {
		rc = mc_refuse(mc, MC_IOERR, "check the file system", "renaming %s to %s: %s",
			       e->tmp, e->path, strerror(errno));
	} else {
		close(e->tmp_fd);
		e->tmp_fd = -1;
		if (slash != NULL)
			*slash = '\0';
		if ((dfd = open(slash != NULL ? (dir[0] ? dir : "/") : ".",
				O_RDONLY | O_DIRECTORY | O_CLOEXEC)) != -1) {
			fsync(dfd);
			close(dfd);
		}
	}
	free(dir);
	mc_users_edit_abort(ep);
	return rc;
}
