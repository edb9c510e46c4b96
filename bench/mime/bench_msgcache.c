/* bench_msgcache.c — prints how fast the message cache is built (messages/s, MB/s) for a 4 KiB
 * text message, a 100 KiB multipart with a base64 attachment and a 1 MiB one, and how fast the
 * blob is read back (view + a part lookup). Figures only, no assertions; bounded in time.
 * Run: meson test -C build --benchmark msgcache -v */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/msgcache.h"

static void make_msg(struct buf *m, size_t attach)
{
	buf_reset(m);
	buf_puts(m, "Return-Path: <a@example.com>\r\n"
		    "Received: from mx.example.com by heron; Mon, 2 Nov 2026 10:00:00 +0000\r\n"
		    "From: \"Example, Alice\" <alice@example.com>\r\n"
		    "To: bob@example.org, Carol <carol@example.org>\r\n"
		    "Subject: benchmark message\r\n"
		    "Date: Mon, 2 Nov 2026 09:59:58 +0100\r\n"
		    "Message-ID: <bench@example.com>\r\nMIME-Version: 1.0\r\n");
	if (attach == 0) {
		buf_puts(m, "Content-Type: text/plain; charset=utf-8\r\n\r\n");
		while (m->len < 4096)
			buf_puts(
				m,
				"The quick brown fox jumps over the lazy dog, again and again.\r\n");
		return;
	}
	buf_puts(m, "Content-Type: multipart/mixed; boundary=\"=_bench\"\r\n\r\n--=_bench\r\n"
		    "Content-Type: text/plain\r\n\r\nSee attached.\r\n--=_bench\r\n"
		    "Content-Type: application/octet-stream; name=\"a.bin\"\r\n"
		    "Content-Transfer-Encoding: base64\r\n"
		    "Content-Disposition: attachment; filename=\"a.bin\"\r\n\r\n");
	while (m->len < attach)
		buf_puts(m,
			 "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9wcXJzdHV2\r\n");
	buf_puts(m, "--=_bench--\r\n");
}

static void bench(const char *name, const struct buf *m)
{
	struct msgcache_builder *b = msgcache_builder_new();
	struct buf out;
	double t0 = clock_mono_seconds(), t;
	unsigned long n = 0;

	buf_init(&out, 0, 1 << 24);
	do {
		for (int i = 0; i < 50; i++, n++) {
			msgcache_builder_reset(b);
			for (size_t off = 0; off < m->len; off += 16384)
				msgcache_builder_push(b, m->data + off,
						      m->len - off < 16384 ? m->len - off : 16384);
			buf_reset(&out);
			msgcache_builder_finish(b, &out);
		}
		t = clock_mono_seconds() - t0;
	} while (t < 1.0 && n < 10000000);
	printf("build  %-22s %8zu bytes  %10.0f msgs/s  %8.1f MB/s  blob %zu bytes\n", name,
	       m->len, (double)n / t, (double)n * (double)m->len / t / 1e6, out.len);

	struct msgcache_view v;
	struct msgcache_part p;

	n = 0;
	t0 = clock_mono_seconds();
	do {
		for (int i = 0; i < 1000; i++, n++) {
			msgcache_parse(out.data, out.len, &v);
			msgcache_part(out.data, out.len, "2", &p);
		}
		t = clock_mono_seconds() - t0;
	} while (t < 0.5);
	printf("read   %-22s %10.0f views+lookups/s\n", name, (double)n / t);
	buf_release(&out);
	msgcache_builder_free(&b);
}

int main(void)
{
	struct buf m;

	buf_init(&m, 0, 1 << 24);
	make_msg(&m, 0);
	bench("4 KiB text", &m);
	make_msg(&m, 100 * 1024);
	bench("100 KiB multipart", &m);
	make_msg(&m, 1024 * 1024);
	bench("1 MiB multipart", &m);
	buf_release(&m);
	return 0;
}
