/* Tests health/expect.c: status-line parsing and check_expect matching. */
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

int
main(void)
{
    test_status_lines();
    test_expect();
    return CHECK_DONE();
}
