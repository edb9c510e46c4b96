#!/usr/bin/env python3
"""Writes the msgcache test messages (tests/common/msgcache/*.eml) byte for byte.

Kept as a generator so CRLF/LF, 8-bit bytes and the huge header are explicit; the .eml files are
committed too (the tests read those). Run: python3 tests/common/msgcache/gen.py

The expected output (NAME.exp) was compared with Dovecot 2.3's FETCH (ENVELOPE BODY BODYSTRUCTURE)
of the same files; it is identical except:
  bare_lf        Dovecot counts sizes as if line ends were CRLF; Heron counts the stored bytes.
  garbled        To: "<<>>, @@, ..." -- Dovecot writes one (NIL NIL "MISSING_MAILBOX"
                 "SYNTAX_ERROR"); Heron keeps what it could read.
  garbled2       Content-Type "/html" -- Dovecot writes "" ""; Heron applies the RFC 2045
                 default (text/plain; charset us-ascii).
  b64msg         a base64 message/rfc822 part (not parsed): Dovecot counts the CRLF before the
                 boundary into it; Heron does not (RFC 2046: it belongs to the boundary).
  groupfrom      Dovecot keeps trailing white space of Message-ID; Heron trims it."""
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def crlf(s):
    return s.replace("\r\n", "\n").replace("\n", "\r\n").encode("latin-1")


M = {}
M["simple"] = crlf("""Return-Path: <alice@example.com>
Received: from mx.example.com by heron; Mon, 2 Nov 2026 10:00:00 +0000
From: Alice Example <alice@example.com>
To: Bob <bob@example.org>
Subject: Lunch?
Date: Mon, 2 Nov 2026 09:59:58 +0100
Message-ID: <lunch-1@example.com>

Are we still on for lunch today?

-- 
Alice
""")

M["alternative"] = crlf("""From: "News" <news@example.com>
To: reader@example.org
Subject: Weekly digest
Date: Tue, 3 Nov 2026 08:00:00 -0500
Message-ID: <weekly-42@example.com>
MIME-Version: 1.0
Content-Type: multipart/alternative; boundary="alt-b0undary"

This is a multi-part message in MIME format.
--alt-b0undary
Content-Type: text/plain; charset="utf-8"
Content-Transfer-Encoding: quoted-printable

Hello reader,
this week: caf=C3=A9s.
--alt-b0undary
Content-Type: text/html; charset=utf-8
Content-Transfer-Encoding: quoted-printable

<html><body><p>Hello reader,</p><p>this week: caf=C3=A9s.</p></body></html>
--alt-b0undary--
""")

M["mixed_base64"] = crlf("""From: Carol <carol@example.net>
To: dave@example.com
Cc: Eve <eve@example.com>, frank@example.com
Subject: Report and photo
Date: Wed, 4 Nov 2026 12:34:56 +0000
Message-ID: <report-7@example.net>
In-Reply-To: <req-3@example.com>
MIME-Version: 1.0
Content-Type: multipart/mixed;
 boundary="----=_Part_0_1234.5678"

------=_Part_0_1234.5678
Content-Type: text/plain; charset=ISO-8859-1; format=flowed
Content-Transfer-Encoding: 7bit

See the attached report.
------=_Part_0_1234.5678
Content-Type: application/pdf; name="report.pdf"
Content-Transfer-Encoding: base64
Content-Disposition: attachment; filename="report.pdf"; size=30
Content-ID: <part1.report@example.net>
Content-Description: Quarterly report
Content-Language: en, de
Content-Location: http://example.net/report.pdf
Content-MD5: Q2hlY2sgSW50ZWdyaXR5IQ==

JVBERi0xLjQKJcfsj6IKNSAwIG9iago8PC9MZW5ndGggNiAwIFI+PgpzdHJlYW0K
eJzLSM3JyVcozy/KSQEAHFoE+QplbmRzdHJlYW0KZW5kb2JqCg==
------=_Part_0_1234.5678
Content-Type: image/png
Content-Transfer-Encoding: base64
Content-Disposition: inline

iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk
------=_Part_0_1234.5678--
""")

M["nested"] = crlf("""From: gina@example.com
To: hank@example.com
Subject: nested
Date: Thu, 5 Nov 2026 07:00:00 +0200
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary=outer

--outer
Content-Type: multipart/alternative; boundary=inner

--inner
Content-Type: text/plain

plain text
--inner
Content-Type: multipart/related; boundary="deepest"; type="text/html"

--deepest
Content-Type: text/html

<img src="cid:img1">
--deepest
Content-Type: image/gif
Content-ID: <img1>
Content-Transfer-Encoding: base64

R0lGODlhAQABAAAAACw=
--deepest--
--inner--
--outer
Content-Type: text/plain; charset=us-ascii
Content-Disposition: attachment; filename=notes.txt

line one
line two
--outer--
""")

M["rfc822"] = crlf("""From: ivan@example.com
To: judy@example.com
Subject: Fwd: original
Date: Fri, 6 Nov 2026 18:00:00 -0800
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="fwd"

--fwd
Content-Type: text/plain

Forwarding this.
--fwd
Content-Type: message/rfc822
Content-Disposition: inline

From: "Mallory, M." <mallory@example.org>
To: ivan@example.com
Subject: original
Date: Thu, 5 Nov 2026 17:00:00 -0800
Message-ID: <orig@example.org>
MIME-Version: 1.0
Content-Type: multipart/alternative; boundary="orig-alt"

--orig-alt
Content-Type: text/plain; charset=utf-8

original text
--orig-alt
Content-Type: text/html; charset=utf-8

<p>original text</p>
--orig-alt--
--fwd--
""")

M["no_close"] = crlf("""From: kim@example.com
Subject: truncated multipart
Content-Type: multipart/mixed; boundary="never-closed"

--never-closed
Content-Type: text/plain

first part
--never-closed
Content-Type: text/plain

second part runs to the end
and has no closing boundary
""")

M["no_body"] = crlf("""From: leo@example.com
To: mia@example.com
Subject: empty

""")

M["header_only"] = b"From: nick@example.com\r\nSubject: header only, no empty line\r\nTo: olga@example.com"

M["bare_lf"] = ("""From: pat@example.com
To: quinn@example.com
Subject: bare LF line ends
Content-Type: multipart/mixed; boundary=lf

--lf
Content-Type: text/plain

one
two
--lf
Content-Type: application/octet-stream

AAAA
--lf--
""").encode()

M["eightbit"] = ("From: =?UTF-8?Q?Ren=C3=A9e?= <renee@example.com>\r\n"
                 "To: \"J\xc3\xbcrgen\" <juergen@example.de>\r\n"
                 "Subject: =?ISO-8859-1?Q?Gr=FC=DFe?= und Gr\xc3\xbc\xc3\x9fe\r\n"
                 "Date: Sat, 7 Nov 2026 11:11:11 +0100\r\n"
                 "Content-Type: text/plain; charset=utf-8\r\n"
                 "Content-Transfer-Encoding: 8bit\r\n"
                 "\r\n"
                 "Gr\xc3\xbc\xc3\x9fe aus K\xc3\xb6ln\r\n").encode("latin-1")

M["huge_header"] = (b"From: sam@example.com\r\nSubject: huge\r\nX-Huge: " + b"x" * 100000 +
                    b"\r\nReferences: " + b" ".join(b"<%d@example.com>" % i for i in range(3000)) +
                    b"\r\nTo: tom@example.com\r\n\r\nbody\r\n")

M["groups"] = crlf("""From: uma@example.com
To: undisclosed-recipients:;
Cc: Friends: vic@example.com, "Walt W." <walt@example.com>;, xena@example.com
Bcc: Empty Group:;
Subject: groups
Date: 8 Nov 26 10:00 EST

body
""")

M["quoted_names"] = crlf("""From: "Doe, John" <john.doe@example.com>
Sender: yara@example.com (Yara the Sender)
Reply-To: "zed \\"the\\" boss" <"zed boss"@example.com>
To: "Smith, Jane" <jane@example.com>, <@route1,@route2:rob@example.com>, plain@example.com
Cc: Comment Name (comment) <cn@example.com>, nodomain
Subject: quoted names, commas
Date: Sun, 08 Nov 2026 23:59:60 +0000

body
""")

M["rfc2231"] = crlf("""From: a@example.com
Subject: rfc2231
Content-Type: multipart/mixed; boundary="=_b"

--=_b
Content-Type: application/octet-stream;
 name*0="very long ";
 name*1="file name.bin"
Content-Disposition: attachment;
 filename*0*=UTF-8''%E2%82%AC%20rates;
 filename*1*=%20.bin

data
--=_b--
""")

M["digest"] = crlf("""From: list@example.com
Subject: digest
Content-Type: multipart/digest; boundary=dg

--dg

From: one@example.com
Subject: first

first body
--dg
Content-Type: text/plain

a text part in a digest
--dg--
""")

M["garbled"] = crlf("""From: garbage
To: <<>>, @@, "unterminated
Subject: garbled
Content-Type: multipart/mixed; boundary=
Content-Transfer-Encoding: x

--
not a boundary
""")

M["garbled2"] = crlf("""From: b@example.com
Subject: bad types
Content-Type: /html; charset=
Content-Language: (none)

text
""")

# Smaller shapes (compared with Dovecot 2.3 too).
SMALL = {
    "flowed": "From: a@b.c\nContent-Type: TEXT/PLAIN; format=flowed; DelSp=Yes\nContent-Language: en\n"
              "Content-Disposition: inline\n\nhi\n",
    "b64msg": "From: a@b.c\nContent-Type: multipart/mixed; boundary=z\n\n--z\nContent-Type: message/rfc822\n"
              "Content-Transfer-Encoding: base64\n\nRnJvbTogYUBiLmMKCmhp\n--z--\n",
    "noboundary": "From: a@b.c\nContent-Type: multipart/mixed\n\nhello\n",
    "toprfc822": "From: outer@b.c\nContent-Type: message/rfc822\n\nFrom: inner@b.c\nSubject: in\n\ninner body\n",
    "emptysubj": "Subject: \nSender: s@x.y\nReply-To:\nTo: (just a comment)\n\nx\n",
    "groupfrom": "From: G: a@b.c;\nTo: \"A\" <a@b.c> (cmt), \"B (not a comment)\" <b@c.d>\n"
                 "Message-ID:   <x@y>  \nIn-Reply-To: <a@b> <c@d>\n\nx\n",
    "emptypart": "Content-Type: multipart/mixed; boundary=q\n\n--q\n--q\n\n--q--\n",
    "mixedcase": "Content-Type: Multipart/Mixed; Boundary=\"Q\"\n\n--Q\nContent-type: Text/Html; Charset=UTF-8\n"
                 "Content-transfer-encoding: BASE64\n\nPGI+\n--Q--\n",
    "preamble_only": "Content-Type: multipart/mixed; boundary=q\n\njust preamble\n",
    "nested_rfc": "Content-Type: multipart/digest; boundary=d\n\n--d\n\nSubject: one\n"
                  "Content-Type: message/rfc822\n\nSubject: two\n\nbody\n--d--\n",
    "dispparams": "Content-Type: application/octet-stream\nContent-Disposition: attachment; "
                  "filename=\"x y.txt\"; creation-date=\"Mon, 1 Jan 2001 00:00:00 +0000\"\n"
                  "Content-Location: x\n  y\nContent-Language: en-US, fr (french)\n\ndata",
}
for name, text in SMALL.items():
    M[name] = crlf(text)

for name, data in M.items():
    with open(os.path.join(HERE, name + ".eml"), "wb") as f:
        f.write(data)
