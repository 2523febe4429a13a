/* Tests health/expect.c: status-line parsing, check_expect matching, and the
 * verdict on an answer as its bytes arrive. */
#include <string.h>

#include "check.h"
#include "hc.h"

static int
parse(const char *line, int *code, char *reason, size_t rlen)
{
    return hc_parse_status_line(line, strlen(line), code, reason, rlen);
}

static void
test_status_lines(void)
{
    char reason[64];
    int code = 0;

    CHECK_EQ_INT(parse("HTTP/1.1 200 OK\r\n", &code, reason, sizeof(reason)), 0);
    CHECK_EQ_INT(code, 200);
    CHECK_EQ_STR(reason, "OK");
    CHECK_EQ_INT(parse("HTTP/1.0 500 Internal Server Error\n", &code, reason, sizeof(reason)), 0);
    CHECK_EQ_INT(code, 500);
    CHECK_EQ_STR(reason, "Internal Server Error");
    CHECK_EQ_INT(parse("HTTP/1.1 204\r\n", &code, reason, sizeof(reason)), 0);
    CHECK_EQ_INT(code, 204);
    CHECK_EQ_STR(reason, "");
    /* control bytes in the reason never reach a log line */
    CHECK_EQ_INT(parse("HTTP/1.1 200 O\x1bK\r\n", &code, reason, sizeof(reason)), 0);
    CHECK_EQ_STR(reason, "O?K");
    /* a long reason is cut to the buffer */
    CHECK_EQ_INT(parse("HTTP/1.1 200 abcdefghij\r\n", &code, reason, 4), 0);
    CHECK_EQ_STR(reason, "abc");

    CHECK_EQ_INT(parse("", &code, reason, sizeof(reason)), -1);
    CHECK_EQ_INT(parse("garbage\r\n", &code, reason, sizeof(reason)), -1);
    CHECK_EQ_INT(parse("HTTP/2 200 OK\r\n", &code, reason, sizeof(reason)), -1);
    CHECK_EQ_INT(parse("HTTP/1.1 20 OK\r\n", &code, reason, sizeof(reason)), -1);
    CHECK_EQ_INT(parse("HTTP/1.1 2000 OK\r\n", &code, reason, sizeof(reason)), -1);
    CHECK_EQ_INT(parse("HTTP/1.1 abc OK\r\n", &code, reason, sizeof(reason)), -1);
    CHECK_EQ_INT(parse("HTTP/1.1 099 OK\r\n", &code, reason, sizeof(reason)), -1);
    CHECK_EQ_INT(parse("HTTP/1.1  200 OK\r\n", &code, reason, sizeof(reason)), -1);
    CHECK_EQ_INT(parse("SSH-2.0-OpenSSH_9.2\r\n", &code, reason, sizeof(reason)), -1);
}

/* hc_parse_status_line with an explicit length (for NUL bytes, lines cut
 * short) */
static int
parse_n(const char *line, size_t len, int *code, char *reason, size_t rlen)
{
    return hc_parse_status_line(line, len, code, reason, rlen);
}

/* One accepted line: its code and reason. */
static void
check_ok(const char *line, int want_code, const char *want_reason)
{
    char reason[64];
    int code = -7;

    if (parse(line, &code, reason, sizeof(reason)) != 0) {
        fprintf(stderr, "  rejected: \"%s\"\n", line);
        CHECK_EQ_INT(parse(line, &code, reason, sizeof(reason)), 0);
        return;
    }
    CHECK_EQ_INT(code, want_code);
    CHECK_EQ_STR(reason, want_reason);
}

static void
check_bad(const char *line)
{
    char reason[64];
    int code = 0;

    if (parse(line, &code, reason, sizeof(reason)) != -1) {
        fprintf(stderr, "  accepted: \"%s\"\n", line);
        CHECK_EQ_INT(parse(line, &code, reason, sizeof(reason)), -1);
    }
}

static void
test_status_line_edges(void)
{
    char reason[64], big[32];
    char longline[400];
    int code = 0;

    /* no reason, with and without the space before it */
    check_ok("HTTP/1.1 200", 200, "");
    check_ok("HTTP/1.1 200 ", 200, "");
    check_ok("HTTP/1.1 200 \r\n", 200, "");
    /* extra spaces: none may come before the code; after it they are part
     * of the reason */
    check_bad("HTTP/1.1  200 OK\r\n");
    check_bad(" HTTP/1.1 200 OK\r\n");
    check_bad("HTTP/1.1\t200 OK\r\n");
    check_bad("HTTP/1.1 200\tOK\r\n");
    check_ok("HTTP/1.1 200  OK\r\n", 200, " OK");
    check_ok("HTTP/1.1 200 OK  \r\n", 200, "OK  ");
    check_ok("HTTP/1.1 404 Not  Found\r\n", 404, "Not  Found");
    /* two or four digits */
    check_bad("HTTP/1.1 20\r\n");
    check_bad("HTTP/1.1 20");
    check_bad("HTTP/1.1 20 OK");
    check_bad("HTTP/1.1 2000\r\n");
    check_bad("HTTP/1.1 2000 OK\r\n");
    check_bad("HTTP/1.1 20000\r\n");
    /* non-digits in the code ('/' and ':' border the digits) */
    check_bad("HTTP/1.1 2x0 OK\r\n");
    check_bad("HTTP/1.1 20x OK\r\n");
    check_bad("HTTP/1.1 x00 OK\r\n");
    check_bad("HTTP/1.1 20/ OK\r\n");
    check_bad("HTTP/1.1 20: OK\r\n");
    check_bad("HTTP/1.1 +20 OK\r\n");
    check_bad("HTTP/1.1 -20 OK\r\n");
    check_bad("HTTP/1.1 2 0 OK\r\n");
    check_bad("HTTP/1.1 200OK\r\n");
    /* the version alone, or cut short */
    check_bad("HTTP/1.1");
    check_bad("HTTP/1.1 ");
    check_bad("HTTP/1.1\r\n");
    check_bad("HTTP/1.1 \r\n");
    check_bad("HTTP/1.");
    check_bad("H");
    /* the version is case-sensitive, and only 1.0 or 1.1 */
    check_bad("http/1.1 200 OK\r\n");
    check_bad("Http/1.1 200 OK\r\n");
    check_bad("HTTP/1.2 200 OK\r\n");
    check_bad("HTTP/1.9 200 OK\r\n");
    check_bad("HTTP/2.0 200 OK\r\n");
    check_bad("HTTP/11 200 OK\r\n");
    check_bad("HTTP/1.1x200 OK\r\n");
    check_ok("HTTP/1.0 200 OK", 200, "OK");
    /* line ends: none, CRLF, bare LF, bare CR, several; a CR inside the
     * reason is a control byte like any other */
    check_ok("HTTP/1.1 200 OK", 200, "OK");
    check_ok("HTTP/1.1 200 OK\r", 200, "OK");
    check_ok("HTTP/1.1 200 OK\r\n\r\n", 200, "OK");
    check_ok("HTTP/1.1 200 OK\n\r", 200, "OK");
    check_ok("HTTP/1.1 200 O\rK\r\n", 200, "O?K");
    check_ok("HTTP/1.1 200 O\tK\r\n", 200, "O?K");
    check_ok("HTTP/1.1 200 caf\xc3\xa9\r\n", 200, "caf??");     /* non-ASCII */
    check_ok("HTTP/1.1 200 a\x7f" "b\r\n", 200, "a?b");          /* DEL */
    check_ok("HTTP/1.1 200 ~ !\r\n", 200, "~ !");               /* the edges kept */
    /* empty lines */
    check_bad("");
    check_bad("\r\n");
    check_bad("\n");
    check_bad("\r\n\r\n");
    /* codes: three digits, 100..599 (the classes HTTP defines, and what
     * check_expect may name) */
    check_ok("HTTP/1.1 100 Continue\r\n", 100, "Continue");
    check_ok("HTTP/1.1 599\r\n", 599, "");
    check_bad("HTTP/1.1 600 Beyond\r\n");
    check_bad("HTTP/1.1 700\r\n");
    check_bad("HTTP/1.1 999\r\n");
    check_bad("HTTP/1.1 099\r\n");
    check_bad("HTTP/1.1 000\r\n");
    check_bad("HTTP/1.1 001 x\r\n");

    /* a reason longer than the buffer: cut, NUL-terminated, nothing
     * written past reason_len */
    memset(longline, 'r', sizeof(longline));
    memcpy(longline, "HTTP/1.1 503 ", 13);
    memcpy(longline + sizeof(longline) - 3, "\r\n", 3);
    memset(big, '#', sizeof(big));
    CHECK_EQ_INT(parse(longline, &code, big, 16), 0);
    CHECK_EQ_INT(code, 503);
    CHECK_EQ_INT(strlen(big), 15);
    CHECK_EQ_STR(big, "rrrrrrrrrrrrrrr");
    for (size_t i = 16; i < sizeof(big); i++)
        CHECK_EQ_INT(big[i], '#');
    CHECK_EQ_INT(parse(longline, &code, reason, sizeof(reason)), 0);
    CHECK_EQ_INT(strlen(reason), sizeof(reason) - 1);
    /* exactly fits, one short, room for the NUL only */
    CHECK_EQ_INT(parse("HTTP/1.1 200 OK\r\n", &code, big, 3), 0);
    CHECK_EQ_STR(big, "OK");
    CHECK_EQ_INT(parse("HTTP/1.1 200 OK\r\n", &code, big, 2), 0);
    CHECK_EQ_STR(big, "O");
    CHECK_EQ_INT(parse("HTTP/1.1 200 OK\r\n", &code, big, 1), 0);
    CHECK_EQ_STR(big, "");
    /* no buffer at all: the code alone, the buffer untouched */
    memset(big, '#', sizeof(big));
    code = 0;
    CHECK_EQ_INT(parse("HTTP/1.1 302 Found\r\n", &code, big, 0), 0);
    CHECK_EQ_INT(code, 302);
    CHECK_EQ_INT(big[0], '#');

    /* len, not the NUL, ends the line */
    CHECK_EQ_INT(parse_n("HTTP/1.1 200 O\0K\r\n", 18, &code, reason, sizeof(reason)), 0);
    CHECK_EQ_INT(code, 200);
    CHECK_EQ_STR(reason, "O?K");
    CHECK_EQ_INT(parse_n("HTTP/1.1 2\0" "0 OK\r\n", 17, &code, reason, sizeof(reason)), -1);
    CHECK_EQ_INT(parse_n("HTTP/1.1\0" "200 OK\r\n", 17, &code, reason, sizeof(reason)), -1);
    CHECK_EQ_INT(parse_n("HTTP/1\0" "1 200 OK\r\n", 17, &code, reason, sizeof(reason)), -1);
    CHECK_EQ_INT(parse_n("HTTP/1.1 200 OK\r\n", 14, &code, reason, sizeof(reason)), 0);
    CHECK_EQ_STR(reason, "O");
    CHECK_EQ_INT(parse_n("HTTP/1.1 200 OK\r\n", 12, &code, reason, sizeof(reason)), 0);
    CHECK_EQ_STR(reason, "");
    CHECK_EQ_INT(parse_n("HTTP/1.1 200 OK\r\n", 11, &code, reason, sizeof(reason)), -1);
    CHECK_EQ_INT(parse_n("HTTP/1.1 200 OK\r\n", 0, &code, reason, sizeof(reason)), -1);
}

/* A rejected line leaves *code and the reason as they were, so a caller
 * never finds a code read from a line that was refused. */
static void
test_rejected_writes_nothing(void)
{
    static const char *const lines[] = {
        "HTTP/1.1 099 Low\r\n", "HTTP/1.1 000\r\n", "HTTP/1.1 600 High\r\n",
        "HTTP/1.1 999\r\n", "HTTP/1.1 2000 OK\r\n", "HTTP/1.1 200OK\r\n",
        "HTTP/1.2 200 OK\r\n", "garbage\r\n", "",
    };
    char reason[64];
    int code;

    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
        code = -7;
        strcpy(reason, "untouched");
        CHECK_EQ_INT(parse(lines[i], &code, reason, sizeof(reason)), -1);
        CHECK_EQ_INT(code, -7);
        CHECK_EQ_STR(reason, "untouched");
    }
}

static void
test_expect(void)
{
    struct conf_expect e = { .nranges = 3 };

    e.ranges[0].lo = 200; e.ranges[0].hi = 200;
    e.ranges[1].lo = 204; e.ranges[1].hi = 204;
    e.ranges[2].lo = 300; e.ranges[2].hi = 399;
    CHECK(hc_expect_match(&e, 200));
    CHECK(hc_expect_match(&e, 204));
    CHECK(hc_expect_match(&e, 300));
    CHECK(hc_expect_match(&e, 399));
    CHECK(!hc_expect_match(&e, 201));
    CHECK(!hc_expect_match(&e, 400));
    CHECK(!hc_expect_match(&e, 500));
    e.nranges = 0;
    CHECK(!hc_expect_match(&e, 200));
}

/* hc_status_verdict on each prefix of answer, as if it came byte by byte:
 * undecided up to the first line end (or cap bytes), then the verdict of
 * the whole answer. Returns that verdict's detail in detail. */
static bool
verdict_bytewise(const char *answer, size_t len, size_t cap,
                 const struct conf_expect *e, char *detail, size_t dlen)
{
    const char *nl = memchr(answer, '\n', len);
    size_t decided_at = nl ? (size_t)(nl - answer) + 1 : cap;
    bool passed = true, first = false;
    char d[HC_DETAIL_MAX];

    for (size_t n = 0; n <= len && n <= cap; n++) {
        bool done = hc_status_verdict(answer, n, cap, e, NULL, &passed, NULL, d, sizeof(d));
        CHECK_EQ_INT(done, n >= decided_at);
        if (done && !first) {
            first = true;
            snprintf(detail, dlen, "%s", d);
        } else if (done) {
            CHECK_EQ_STR(d, detail);
        }
    }
    return passed;
}

static void
test_verdict(void)
{
    static const struct { const char *answer; bool passed; const char *detail; }
    answers[] = {
        { "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", true, "HTTP 200 OK" },
        { "HTTP/1.0 503 Service Unavailable\n", false,
          "HTTP 503 Service Unavailable" },
        { "HTTP/1.1 204\r\n", true, "HTTP 204" },
        /* what follows the first line end never matters */
        { "HTTP/1.1 301 Moved\r\n\x01\xff garbage \n HTTP/1.1 500\r\n", true,
          "HTTP 301 Moved" },
        { "SSH-2.0-OpenSSH_9.2\r\n", false, "malformed status line" },
        { "HTTP/1.1 600 Beyond\r\n", false, "malformed status line" },
    };
    struct conf_expect e = { .nranges = 1 };
    char detail[HC_DETAIL_MAX], line[300];
    const char *a;
    bool passed;

    e.ranges[0].lo = 200;
    e.ranges[0].hi = 399;
    for (size_t i = 0; i < sizeof(answers) / sizeof(answers[0]); i++) {
        a = answers[i].answer;
        CHECK_EQ_INT(verdict_bytewise(a, strlen(a), 255, &e, detail,
                                      sizeof(detail)), answers[i].passed);
        CHECK_EQ_STR(detail, answers[i].detail);
    }

    /* no line end: undecided below cap, malformed at cap */
    memset(line, 'x', sizeof(line));
    memcpy(line, "HTTP/1.1 200 ", 13);
    CHECK(!hc_status_verdict(line, 254, 255, &e, NULL, &passed, NULL, detail, sizeof(detail)));
    CHECK(hc_status_verdict(line, 255, 255, &e, NULL, &passed, NULL, detail, sizeof(detail)));
    CHECK(!passed);
    CHECK_EQ_STR(detail, "malformed status line: no line end in 255 bytes");
    CHECK(!verdict_bytewise(line, 255, 255, &e, detail, sizeof(detail)));
    /* a line end as the cap's last byte still counts */
    line[254] = '\n';
    CHECK(verdict_bytewise(line, 255, 255, &e, detail, sizeof(detail)));
    CHECK_EQ_INT(strncmp(detail, "HTTP 200 xxx", 12), 0);
    /* nothing yet */
    CHECK(!hc_status_verdict("", 0, 255, &e, NULL, &passed, NULL, detail, sizeof(detail)));
    /* the detail is cut to its buffer */
    a = "HTTP/1.1 200 OK\r\n";
    CHECK(hc_status_verdict(a, strlen(a), 255, &e, NULL, &passed, NULL, detail, 7));
    CHECK(passed);
    CHECK_EQ_STR(detail, "HTTP 2");
}

/* check_warn is looked at first; a warning passes. */
static void
test_warn_verdict(void)
{
    struct conf_expect e = { .nranges = 1, .ranges = { { 200, 399 } } };
    struct conf_expect w = { .nranges = 2, .ranges = { { 429, 429 }, { 200, 200 } } };
    const char *a429 = "HTTP/1.1 429 Too Many Requests\r\n", *a200 = "HTTP/1.1 200 OK\r\n";
    const char *a204 = "HTTP/1.1 204 No Content\r\n", *a500 = "HTTP/1.1 500 Oops\r\n";
    char detail[HC_DETAIL_MAX];
    bool passed, warned;

    CHECK(hc_status_verdict(a429, strlen(a429), 255, &e, &w, &passed, &warned, detail,
                            sizeof(detail)));
    CHECK(passed && warned);
    CHECK_EQ_STR(detail, "HTTP 429 Too Many Requests");
    CHECK(hc_status_verdict(a200, strlen(a200), 255, &e, &w, &passed, &warned, detail,
                            sizeof(detail)));
    CHECK(passed && warned);                    /* in both: warn wins */
    CHECK(hc_status_verdict(a204, strlen(a204), 255, &e, &w, &passed, &warned, detail,
                            sizeof(detail)));
    CHECK(passed && !warned);
    CHECK(hc_status_verdict(a500, strlen(a500), 255, &e, &w, &passed, &warned, detail,
                            sizeof(detail)));
    CHECK(!passed && !warned);
    w.nranges = 0;                              /* check_warn empty */
    CHECK(hc_status_verdict(a429, strlen(a429), 255, &e, &w, &passed, &warned, detail,
                            sizeof(detail)));
    CHECK(!passed && !warned);
}

int
main(void)
{
    test_warn_verdict();
    test_status_lines();
    test_status_line_edges();
    test_rejected_writes_nothing();
    test_expect();
    test_verdict();
    return CHECK_DONE();
}
