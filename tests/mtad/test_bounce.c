/* test_bounce.c — the headers a DSN returns (mtad/bounce.c, bounce_read_header): read from a
 * file in 16 KiB chunks, they end at the CRLF before the empty line wherever the chunks cut
 * the CRLF CRLF (the empty line and the body never returned, no header cut short), at most
 * 64 KiB of them, and a message without a body is returned whole; bounce_header_len finds
 * the same header in a message in memory (a maildrop file's, pickup.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "mtad/relay.h"

#define CHUNK (16 * 1024)

/* bounce.c's neighbours in mtad, not reached by bounce_read_header */
const char *queue_dsn_of(const char *text, int code, char *buf, size_t size)
{
	(void)text;
	(void)code;
	snprintf(buf, size, "5.0.0");
	return buf;
}

void queue_runner_kick(struct mtad *m)
{
	(void)m;
}

/* A message whose header is hlen bytes up to and including the CRLF CRLF, then a body
   that has an empty line of its own. */
static int message_fd(size_t hlen, const char *body, char **hdr_r)
{
	char *h = malloc(hlen + 1);
	size_t off = 0, fields = hlen - 2, line = 0;
	int fd = memfd_create("msg", MFD_CLOEXEC);

	assert_non_null(h);
	assert_true(fd >= 0);
	assert_true(hlen >= 40);
	while (off < fields) {
		/* "X-Pad: aaa...\r\n" fields of 64 bytes, the last one up to 127 */
		size_t n = fields - off >= 128 ? 64 : fields - off;

		memcpy(h + off, "X-Pad: ", 7);
		memset(h + off + 7, 'a' + (int)(line++ % 26), n - 9);
		memcpy(h + off + n - 2, "\r\n", 2);
		off += n;
	}
	memcpy(h + fields, "\r\n", 2); /* the empty line */
	h[hlen] = '\0';
	assert_int_equal(write(fd, h, hlen), (ssize_t)hlen);
	assert_int_equal(write(fd, body, strlen(body)), (ssize_t)strlen(body));
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	*hdr_r = h;
	return fd;
}

static void header_is(size_t hlen)
{
	struct buf hdr;
	char *h;
	int fd = message_fd(hlen, "body line\r\n\r\nsecond paragraph\r\n", &h);

	buf_init(&hdr, 1024, 64 * 1024);
	assert_int_equal(bounce_read_header(fd, &hdr), 0);
	if (hdr.len != hlen - 2 || memcmp(hdr.data, h, hlen - 2) != 0)
		fail_msg("a header of %zu bytes: %zu returned", hlen, hdr.len);
	buf_release(&hdr);
	close(fd);
	free(h);
}

/* The CRLF CRLF cut by the first and second chunk boundary at each of its bytes. */
static void test_end_across_chunks(void **state)
{
	(void)state;
	for (size_t edge = CHUNK; edge <= 2 * CHUNK; edge += CHUNK)
		for (size_t hlen = edge - 3; hlen <= edge + 4; hlen++)
			header_is(hlen);
}

static void test_short_header(void **state)
{
	(void)state;
	header_is(40);
	header_is(4000);
}

/* No empty line in the first 64 KiB: those, cut there. */
static void test_long_header_cut(void **state)
{
	struct buf hdr;
	char *h;
	int fd = message_fd(200 * 1024, "x\r\n", &h);

	(void)state;
	buf_init(&hdr, 1024, 64 * 1024);
	assert_int_equal(bounce_read_header(fd, &hdr), 0);
	assert_int_equal(hdr.len, 64 * 1024);
	assert_memory_equal(hdr.data, h, 64 * 1024);
	buf_release(&hdr);
	close(fd);
	free(h);
}

/* Headers only, no empty line at all: the whole message. */
static void test_no_body(void **state)
{
	const char *msg = "Subject: only headers\r\nFrom: <a@b>\r\n";
	struct buf hdr;
	int fd = memfd_create("msg", MFD_CLOEXEC);

	(void)state;
	assert_int_equal(write(fd, msg, strlen(msg)), (ssize_t)strlen(msg));
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	buf_init(&hdr, 1024, 64 * 1024);
	assert_int_equal(bounce_read_header(fd, &hdr), 0);
	assert_int_equal(hdr.len, strlen(msg));
	assert_memory_equal(hdr.data, msg, strlen(msg));
	buf_release(&hdr);
	close(fd);
}

/* From the descriptor's offset on (a maildrop file's message follows its envelope). */
static void test_from_offset(void **state)
{
	const char *f = "HERON-MAILDROP 1\nS a@b\nR c@d\n\nSubject: s\r\n\r\nbody\r\n";
	struct buf hdr;
	int fd = memfd_create("msg", MFD_CLOEXEC);

	(void)state;
	assert_int_equal(write(fd, f, strlen(f)), (ssize_t)strlen(f));
	assert_int_equal(lseek(fd, 30, SEEK_SET), 30);
	buf_init(&hdr, 1024, 64 * 1024);
	assert_int_equal(bounce_read_header(fd, &hdr), 0);
	assert_string_equal(buf_cstr(&hdr), "Subject: s\r\n");
	buf_release(&hdr);
	close(fd);
}

/* The header in memory is the one read from a file, whatever its length. */
static void test_header_len_in_memory(void **state)
{
	const size_t lens[] = { 40,        CHUNK - 1, CHUNK, CHUNK + 2, 2 * CHUNK + 3,
				64 * 1024, 200 * 1024 };
	const char *body = "body line\r\n\r\nsecond paragraph\r\n";
	const char *nobody = "Subject: only headers\r\nFrom: <a@b>\r\n";

	(void)state;
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		struct buf hdr;
		char *h, *msg;
		int fd = message_fd(lens[i], body, &h);
		size_t n = lens[i] + strlen(body);

		msg = malloc(n);
		assert_non_null(msg);
		memcpy(msg, h, lens[i]);
		memcpy(msg + lens[i], body, strlen(body));
		buf_init(&hdr, 1024, 64 * 1024);
		assert_int_equal(bounce_read_header(fd, &hdr), 0);
		assert_int_equal(bounce_header_len(msg, n), hdr.len);
		buf_release(&hdr);
		close(fd);
		free(msg);
		free(h);
	}
	assert_int_equal(bounce_header_len(nobody, strlen(nobody)), strlen(nobody));
	assert_int_equal(bounce_header_len("", 0), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_end_across_chunks),
		cmocka_unit_test(test_short_header),
		cmocka_unit_test(test_long_header_cut),
		cmocka_unit_test(test_no_body),
		cmocka_unit_test(test_from_offset),
		cmocka_unit_test(test_header_len_in_memory),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
