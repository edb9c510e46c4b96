/* test_log.c — levels, one line per event (control characters cannot split a line), errno
 * text, event ids, the log file and its reopening (logrotate), the ident kept by a reopen. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/log.h"

/* Runs fn with stderr sent to a temporary file and returns what it wrote. */
static char *capture(void (*fn)(void))
{
	static char out[8192];
	FILE *tmp = tmpfile();
	int saved = dup(2);
	size_t n;

	assert_non_null(tmp);
	fflush(stderr);
	dup2(fileno(tmp), 2);
	fn();
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(tmp);
	n = fread(out, 1, sizeof(out) - 1, tmp);
	out[n] = '\0';
	fclose(tmp);
	return out;
}

static void emit_levels(void)
{
	log_set_level(LOG_LVL_INFO);
	log_debug("hidden-debug");
	log_info("shown-info key=%d", 7);
	log_warnx("shown-warn");
	errno = ENOENT;
	log_warn("open /x");
	log_info("evil\r\nFAKE line");
}

static void test_output(void **state)
{
	char *out;

	log_init("heron-test", true, 0);
	out = capture(emit_levels);
	assert_null(strstr(out, "hidden-debug"));
	assert_non_null(strstr(out, "heron-test["));
	assert_non_null(strstr(out, "info: shown-info key=7\n"));
	assert_non_null(strstr(out, "warn: shown-warn\n"));
	assert_non_null(strstr(out, "open /x: No such file or directory\n"));
	assert_non_null(strstr(out, "evil??FAKE line\n"));
	/* exactly one line per event */
	int lines = 0;
	for (char *p = out; *p; p++)
		lines += *p == '\n';
	assert_int_equal(lines, 4);
}

static void test_ids(void **state)
{
	uint64_t prev = log_new_id();

	for (int i = 0; i < 100000; i++) {
		uint64_t id = log_new_id();

		assert_true(id != prev);
		assert_true(id != 0 || i > 0);
		prev = id;
	}
}

static char *slurp(const char *path)
{
	static char out[8192];
	FILE *f = fopen(path, "r");
	size_t n = 0;

	if (f != NULL) {
		n = fread(out, 1, sizeof(out) - 1, f);
		fclose(f);
	}
	out[n] = '\0';
	return out;
}

static void test_file_reopen(void **state)
{
	char dir[] = "/tmp/heron-log-XXXXXX", path[64], rotated[64], *err = NULL;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/heron.log", dir);
	snprintf(rotated, sizeof(rotated), "%s/heron.log.1", dir);
	assert_int_equal(log_init_file("filetest", path, &err), 0);
	log_set_level(LOG_LVL_INFO);
	log_info("before rotation");
	assert_int_equal(rename(path, rotated), 0);
	log_info("still the old file");
	log_reopen();
	log_info("after reopen");
	assert_non_null(strstr(slurp(rotated), "filetest["));
	assert_non_null(strstr(slurp(rotated), "info: before rotation\n"));
	assert_non_null(strstr(slurp(rotated), "info: still the old file\n"));
	assert_null(strstr(slurp(rotated), "after reopen"));
	assert_non_null(strstr(slurp(path), "filetest["));
	assert_non_null(strstr(slurp(path), "info: after reopen\n"));
	/* a file that cannot be opened: the error names it, logging is unchanged */
	assert_int_equal(log_init_file("filetest", "/nonexistent/dir/x.log", &err), -1);
	assert_non_null(strstr(err, "/nonexistent/dir/x.log"));
	free(err);
	unlink(path);
	unlink(rotated);
	rmdir(dir);
}

static void emit_after_reopen(void)
{
	log_reopen();
	log_info("after a reopen");
}

static void test_reopen_keeps_ident(void **state)
{
	char *out;

	log_init("identkept", true, 0);
	out = capture(emit_after_reopen);
	assert_non_null(strstr(out, " identkept["));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_output),
		cmocka_unit_test(test_ids),
		cmocka_unit_test(test_file_reopen),
		cmocka_unit_test(test_reopen_keeps_ident),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
