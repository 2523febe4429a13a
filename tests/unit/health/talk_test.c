/* Tests health/talk*.c: the mysql, pgsql and redis conversations on
 * packets captured from MariaDB 10.11 and PostgreSQL 15 and on hand-made
 * ones (truncated, oversized, malformed, foreign), each fed whole and in
 * pieces of 1, 2, 3 and 7 bytes: the verdict must not depend on the split. */
#include <string.h>

#include "check.h"
#include "talk.h"

#define S(lit) lit, sizeof(lit) - 1

struct run {
    enum hc_talk_next next;
    bool passed;
    char detail[HC_DETAIL_MAX];
    unsigned char sent[2048];       /* everything sent, the goodbye included */
    size_t nsent;
};

/* Runs a conversation on the server's len bytes, fed step at a time as the
 * probe would (sending whenever asked); closed: the server closes after
 * them. */
static void
run(struct run *r, enum conf_check kind, const char *user, const char *db, enum conf_role role,
    const char *in, size_t len, size_t step, bool closed)
{
    struct hc_talk t;
    enum hc_talk_next next = hc_talk_begin(&t, kind, user, db, role);
    size_t off = 0;

    memset(r, 0, sizeof(*r));
    for (;;) {
        CHECK(t.in_len <= HC_TALK_IN_MAX && t.out_len <= HC_TALK_OUT_MAX);
        if (next != HC_TALK_READ && r->nsent + t.out_len <= sizeof(r->sent)) {
            memcpy(r->sent + r->nsent, t.out, t.out_len);
            r->nsent += t.out_len;
        }
        if (next == HC_TALK_DONE)
            break;
        if (next == HC_TALK_SEND) {
            t.out_len = 0;
            next = t.in_len > 0 ? hc_talk_feed(&t, NULL, 0) : HC_TALK_READ;
            continue;
        }
        if (off == len) {
            if (!closed)
                break;
            next = hc_talk_closed(&t);
            continue;
        }
        size_t k = len - off < step ? len - off : step;
        if (k > hc_talk_room(&t))
            k = hc_talk_room(&t);
        CHECK(k > 0);
        if (k == 0)
            break;
        next = hc_talk_feed(&t, in + off, k);
        off += k;
    }
    r->next = next;
    r->passed = t.passed;
    strcpy(r->detail, t.detail);
}

/* Every split gives want (DONE with passed and detail, or READ); returns
 * the whole-feed run for more checks. */
static struct run
check_talk(enum conf_check kind, const char *user, const char *db, enum conf_role role,
           const char *in, size_t len, bool closed, enum hc_talk_next want, bool want_passed,
           const char *want_detail)
{
    static const size_t steps[] = { 4096, 1, 2, 3, 7 };
    struct run whole, r;

    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        run(i == 0 ? &whole : &r, kind, user, db, role, in, len, steps[i], closed);
        struct run *x = i == 0 ? &whole : &r;
        CHECK_EQ_INT(x->next, want);
        if (want == HC_TALK_DONE) {
            CHECK_EQ_INT(x->passed, want_passed);
            CHECK_EQ_STR(x->detail, want_detail);
        }
        CHECK_EQ_INT(x->nsent, whole.nsent);
        CHECK(memcmp(x->sent, whole.sent, whole.nsent) == 0);
        for (const char *q = x->detail; *q != '\0'; q++)
            CHECK(*q >= 0x20 && *q < 0x7f);
    }
    return whole;
}

#include "talk_packets.h"

/* The packets of a string literal with a few bytes changed: "cat" builds. */
static size_t
cat(char *dst, const char *a, size_t alen, const char *b, size_t blen)
{
    memcpy(dst, a, alen);
    memcpy(dst + alen, b, blen);
    return alen + blen;
}

static void
test_mysql(void)
{
    char buf[1024];
    size_t n;
    struct run r;

    /* Greeting only: the version, without MariaDB's "5.5.5-". */
    r = check_talk(CONF_CHECK_MYSQL, "", "", CONF_ROLE_ANY, S(my_greeting), false, HC_TALK_DONE,
                   true, "MySQL 10.11.19-MariaDB-0+deb12u1");
    CHECK_EQ_INT(r.nsent, 0);
    /* An ERR packet instead of the greeting (no SQLSTATE before it). */
    check_talk(CONF_CHECK_MYSQL, "", "", CONF_ROLE_ANY,
               S("\x17\x00\x00\x00\xff\x10\x04Too many connections"), false, HC_TALK_DONE,
               false, "MySQL 1040 Too many connections");
    check_talk(CONF_CHECK_MYSQL, "lb_check", "", CONF_ROLE_ANY,
               S("\x1d\x00\x00\x00\xff\x69\x04Host '10.1.2.3' is blocked"), false,
               HC_TALK_DONE, false, "MySQL 1129 Host '10.1.2.3' is blocked");

    /* Login: the answer to the greeting, then ERR or OK. */
    r = check_talk(CONF_CHECK_MYSQL, "nobody", "", CONF_ROLE_ANY, S(my_greeting), false,
                   HC_TALK_READ, false, NULL);
    CHECK_EQ_INT(r.nsent, 4 + 32 + 7 + 1 + 22);
    CHECK_EQ_INT(r.sent[0], 32 + 7 + 1 + 22);
    CHECK_EQ_INT(r.sent[3], 1);                         /* sequence 1 */
    CHECK_EQ_INT(r.sent[4 + 1] & 0x02, 0x02);           /* CLIENT_PROTOCOL_41 */
    CHECK(memcmp(r.sent + 4 + 32, "nobody\0\0mysql_native_password\0", 30) == 0);
    n = cat(buf, S(my_greeting), S(my_denied));
    check_talk(CONF_CHECK_MYSQL, "nobody", "", CONF_ROLE_ANY, buf, n, false, HC_TALK_DONE, false,
               "MySQL 1045 Access denied for user 'nobody'@'127.0.0.1' (using password: NO)");
    n = cat(buf, S(my_greeting), S(my_ok));
    r = check_talk(CONF_CHECK_MYSQL, "lb_check", "", CONF_ROLE_ANY, buf, n, false, HC_TALK_DONE,
                   true, "MySQL 10.11.19-MariaDB-0+deb12u1, login ok");
    CHECK(r.nsent >= 5 && memcmp(r.sent + r.nsent - 5, "\x01\x00\x00\x00\x01", 5) == 0);
    /* ... the server closing instead */
    check_talk(CONF_CHECK_MYSQL, "lb_check", "", CONF_ROLE_ANY, S(my_greeting), true,
               HC_TALK_DONE, false, "connection closed while waiting for the MySQL login answer");

    /* An auth switch is answered once, with an empty password. */
    n = cat(buf, S(my_greeting), S("\x17\x00\x00\x02\xfe" "mysql_native_password\0"));
    n += (size_t)(cat(buf + n, S("\x07\x00\x00\x04\x00\x00\x00\x02\x00\x00\x00"), "", 0));
    r = check_talk(CONF_CHECK_MYSQL, "lb_check", "", CONF_ROLE_ANY, buf, n, false, HC_TALK_DONE,
                   true, "MySQL 10.11.19-MariaDB-0+deb12u1, login ok");
    CHECK(r.nsent == 68 + 4 + 5 && memcmp(r.sent + 68, "\x00\x00\x00\x03", 4) == 0);
    n = cat(buf, S(my_greeting), S("\x06\x00\x00\x02\xfe" "ed25\0"));
    n += cat(buf + n, S("\x06\x00\x00\x04\xfe" "ed25\0"), "", 0);
    check_talk(CONF_CHECK_MYSQL, "lb_check", "", CONF_ROLE_ANY, buf, n, false, HC_TALK_DONE, false,
               "MySQL asks again for authentication (ed25): check_user must have no password");
    n = cat(buf, S(my_greeting), S("\x02\x00\x00\x02\x01\x04"));
    check_talk(CONF_CHECK_MYSQL, "lb_check", "", CONF_ROLE_ANY, buf, n, false, HC_TALK_DONE, false,
               "MySQL asks for more authentication data: check_user must have no password");

    /* check_role: read_only after the login. */
    n = cat(buf, S(my_greeting), S(my_ok));
    r = check_talk(CONF_CHECK_MYSQL, "lb_check", "", CONF_ROLE_PRIMARY, buf, n, false,
                   HC_TALK_READ, false, NULL);
    CHECK(r.nsent == 68 + 4 + 26 &&
          memcmp(r.sent + 68, "\x1a\x00\x00\x00\x03SELECT @@global.read_only", 30) == 0);
    n = cat(buf, S(my_greeting), S(my_ok));
    n += cat(buf + n, S(my_read_only_0), "", 0);
    check_talk(CONF_CHECK_MYSQL, "lb_check", "", CONF_ROLE_PRIMARY, buf, n, false, HC_TALK_DONE,
               true, "MySQL read_only=0 (primary)");
    check_talk(CONF_CHECK_MYSQL, "lb_check", "", CONF_ROLE_REPLICA, buf, n, false, HC_TALK_DONE,
               false, "MySQL read_only=0: a primary, check_role = replica");
    buf[n - 9 - 1] = '1';               /* the row's value */
    check_talk(CONF_CHECK_MYSQL, "lb_check", "", CONF_ROLE_REPLICA, buf, n, false, HC_TALK_DONE,
               true, "MySQL read_only=1 (replica)");
    check_talk(CONF_CHECK_MYSQL, "lb_check", "", CONF_ROLE_PRIMARY, buf, n, false, HC_TALK_DONE,
               false, "MySQL read_only=1: a replica, check_role = primary");
    buf[n - 9 - 1] = '7';
    check_talk(CONF_CHECK_MYSQL, "lb_check", "", CONF_ROLE_PRIMARY, buf, n, false, HC_TALK_DONE,
               false, "MySQL read_only answer is not 0 or 1");
    n = cat(buf, S(my_greeting), S(my_ok));
    n += cat(buf + n, S("\x0b\x00\x00\x01\xff\x7a\x04#42000no"), "", 0);
    check_talk(CONF_CHECK_MYSQL, "lb_check", "", CONF_ROLE_PRIMARY, buf, n, false, HC_TALK_DONE,
               false, "MySQL 1146 no");

    /* Truncated, oversized, out of sequence, foreign. */
    check_talk(CONF_CHECK_MYSQL, "", "", CONF_ROLE_ANY, my_greeting, 50, true, HC_TALK_DONE, false,
               "connection closed while waiting for the MySQL greeting");
    check_talk(CONF_CHECK_MYSQL, "", "", CONF_ROLE_ANY, my_greeting, 50, false, HC_TALK_READ,
               false, NULL);
    check_talk(CONF_CHECK_MYSQL, "", "", CONF_ROLE_ANY, S("\xff\xff\xff\x00\x0a"), false,
               HC_TALK_DONE, false, "MySQL packet of 16777215 bytes, longer than the 1020 read "
               "(while waiting for the MySQL greeting)");
    check_talk(CONF_CHECK_MYSQL, "", "", CONF_ROLE_ANY, S("HTTP/1.1 400 Bad Request\r\n"), false,
               HC_TALK_DONE, false, "MySQL packet of 5526600 bytes, longer than the 1020 read "
               "(while waiting for the MySQL greeting)");
    check_talk(CONF_CHECK_MYSQL, "", "", CONF_ROLE_ANY, S("\x03\x00\x00\x01\x0a\x35\x00"), false,
               HC_TALK_DONE, false, "MySQL packet number 1 where 0 was due (while waiting for "
               "the MySQL greeting)");
    check_talk(CONF_CHECK_MYSQL, "", "", CONF_ROLE_ANY, S("\x06\x00\x00\x00\x09hello"), false,
               HC_TALK_DONE, false, "not a MySQL greeting: protocol version 9 where 10 was due");
    check_talk(CONF_CHECK_MYSQL, "", "", CONF_ROLE_ANY, S("\x06\x00\x00\x00\x0ahello"), false,
               HC_TALK_DONE, false, "malformed MySQL greeting (6 bytes)");
    check_talk(CONF_CHECK_MYSQL, "", "", CONF_ROLE_ANY, S("\x00\x00\x00\x00"), false,
               HC_TALK_DONE, false, "not a MySQL greeting: protocol version 0 where 10 was due");
    check_talk(CONF_CHECK_MYSQL, "", "", CONF_ROLE_ANY, S("\x02\x00\x00\x00\xff\x10"), false,
               HC_TALK_DONE, false, "MySQL error packet too short (2 bytes)");
    /* A message with bytes outside printable ASCII: shown as '?'. */
    check_talk(CONF_CHECK_MYSQL, "", "", CONF_ROLE_ANY, S("\x07\x00\x00\x00\xff\x10\x04\x01\n\"x"),
               false, HC_TALK_DONE, false, "MySQL 1040 ??\"x");
}

static void
test_pgsql(void)
{
    char buf[1024];
    size_t n;
    struct run r;

    /* No user: an SSLRequest, passed on S or N. */
    r = check_talk(CONF_CHECK_PGSQL, "", "", CONF_ROLE_ANY, S("N"), false, HC_TALK_DONE, true,
                   "PostgreSQL answered the SSLRequest (N)");
    CHECK(r.nsent == 8 && memcmp(r.sent, "\x00\x00\x00\x08\x04\xd2\x16\x2f", 8) == 0);
    check_talk(CONF_CHECK_PGSQL, "", "", CONF_ROLE_ANY, S("S"), false, HC_TALK_DONE, true,
               "PostgreSQL answered the SSLRequest (S)");
    check_talk(CONF_CHECK_PGSQL, "", "", CONF_ROLE_ANY, S("HTTP/1.1 400"), false, HC_TALK_DONE,
               false, "not PostgreSQL: byte 0x48 where S or N was due");
    check_talk(CONF_CHECK_PGSQL, "", "", CONF_ROLE_ANY, "", 0, true, HC_TALK_DONE, false,
               "connection closed while waiting for the PostgreSQL answer to the SSLRequest");

    /* A user: the startup message, then the login's answers. */
    r = check_talk(CONF_CHECK_PGSQL, "lb", "app", CONF_ROLE_ANY, "", 0, false, HC_TALK_READ,
                   false, NULL);
    CHECK(r.nsent == 8 + 8 + 13 + 27 + 1 &&
          memcmp(r.sent, "\x00\x00\x00\x39\x00\x03\x00\x00user\0lb\0database\0app\0"
                 "application_name\0lb-health\0\0", 57) == 0);
    r = check_talk(CONF_CHECK_PGSQL, "lb", "", CONF_ROLE_ANY, "", 0, false, HC_TALK_READ,
                   false, NULL);
    CHECK(memcmp(r.sent + 8, "user\0lb\0database\0lb\0", 20) == 0);
    r = check_talk(CONF_CHECK_PGSQL, "postgres", "", CONF_ROLE_ANY, S(pg_login_ok), false,
                   HC_TALK_DONE, true, "PostgreSQL login ok");
    CHECK(r.nsent >= 5 && memcmp(r.sent + r.nsent - 5, "X\x00\x00\x00\x04", 5) == 0);
    /* trust authentication: AuthenticationOk, then the refusal */
    check_talk(CONF_CHECK_PGSQL, "nobody", "", CONF_ROLE_ANY, S(pg_no_role), false, HC_TALK_DONE,
               false, "PostgreSQL 28000 role \"nobody\" does not exist");
    check_talk(CONF_CHECK_PGSQL, "postgres", "", CONF_ROLE_ANY, S(pg_too_many), false,
               HC_TALK_DONE, false, "PostgreSQL 53300 sorry, too many clients already");
    check_talk(CONF_CHECK_PGSQL, "postgres", "", CONF_ROLE_ANY, pg_login_ok, 9, true,
               HC_TALK_DONE, false, "connection closed while waiting for PostgreSQL's "
               "ReadyForQuery");
    /* Asked for a password: alive; nothing is sent after it. */
    r = check_talk(CONF_CHECK_PGSQL, "app", "", CONF_ROLE_ANY, S("R\x00\x00\x00\x0c\x00\x00\x00\x05salt"),
                   false, HC_TALK_DONE, true, "PostgreSQL asks for an MD5 password (alive)");
    CHECK_EQ_INT(r.nsent, 8 + 9 + 13 + 27 + 1);     /* the startup message only */
    check_talk(CONF_CHECK_PGSQL, "app", "", CONF_ROLE_ANY,
               S("R\x00\x00\x00\x17\x00\x00\x00\x0aSCRAM-SHA-256\0\0"), false, HC_TALK_DONE,
               true, "PostgreSQL asks for SASL (SCRAM) (alive)");
    /* Malformed and oversized. */
    check_talk(CONF_CHECK_PGSQL, "app", "", CONF_ROLE_ANY, S("E\x00\x01\x00\x00SFATAL"), false,
               HC_TALK_DONE, false, "PostgreSQL message of 65536 bytes, longer than the 1023 "
               "read (while waiting for the PostgreSQL answer to the startup message)");
    check_talk(CONF_CHECK_PGSQL, "app", "", CONF_ROLE_ANY, S("R\x00\x00\x00\x02"), false,
               HC_TALK_DONE, false, "malformed PostgreSQL message 'R' (length 2)");
    check_talk(CONF_CHECK_PGSQL, "app", "", CONF_ROLE_ANY, S("R\x00\x00\x00\x04"), false,
               HC_TALK_DONE, false, "malformed PostgreSQL authentication request");
    check_talk(CONF_CHECK_PGSQL, "app", "", CONF_ROLE_ANY, S("D\x00\x00\x00\x04"), false,
               HC_TALK_DONE, false, "PostgreSQL sent message 'D' while we waited for the "
               "PostgreSQL answer to the startup message");
    check_talk(CONF_CHECK_PGSQL, "app", "", CONF_ROLE_ANY, S("E\x00\x00\x00\x06x\0"), false,
               HC_TALK_DONE, false, "PostgreSQL error without a code or message");
    n = cat(buf, S("E\x00\x00\x00\x0e" "C57P03\0Mx\0\0"), "", 0);
    check_talk(CONF_CHECK_PGSQL, "app", "", CONF_ROLE_ANY, buf, n, false, HC_TALK_DONE, false,
               "PostgreSQL 57P03 x");
    /* Fields that run past the message end are cut at it. */
    check_talk(CONF_CHECK_PGSQL, "app", "", CONF_ROLE_ANY, S("E\x00\x00\x00\x08Mabc"), false,
               HC_TALK_DONE, false, "PostgreSQL abc");
}

static void
test_redis(void)
{
    char big[1500];
    struct run r;

    r = check_talk(CONF_CHECK_REDIS, "", "", CONF_ROLE_ANY, S("+PONG\r\n"), false, HC_TALK_DONE,
                   true, "Redis PONG");
    CHECK(r.nsent == 14 && memcmp(r.sent, "*1\r\n$4\r\nPING\r\n", 14) == 0);
    check_talk(CONF_CHECK_REDIS, "", "", CONF_ROLE_ANY,
               S("-LOADING Redis is loading the dataset in memory\r\n"), false, HC_TALK_DONE,
               false, "Redis LOADING Redis is loading the dataset in memory");
    check_talk(CONF_CHECK_REDIS, "", "", CONF_ROLE_ANY,
               S("-BUSY Redis is busy running a script.\r\n"), false, HC_TALK_DONE, false,
               "Redis BUSY Redis is busy running a script.");
    check_talk(CONF_CHECK_REDIS, "", "", CONF_ROLE_ANY, S("-NOAUTH Authentication required.\r\n"),
               false, HC_TALK_DONE, true,
               "Redis NOAUTH Authentication required. (alive; lb sends no password)");
    check_talk(CONF_CHECK_REDIS, "", "", CONF_ROLE_PRIMARY,
               S("-NOAUTH Authentication required.\r\n"), false, HC_TALK_DONE, false,
               "Redis NOAUTH Authentication required.");

    /* ROLE, pipelined after PING. */
    r = check_talk(CONF_CHECK_REDIS, "", "", CONF_ROLE_PRIMARY,
                   S("+PONG\r\n*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n"), false, HC_TALK_DONE, true,
                   "Redis role master");
    CHECK(r.nsent == 28 && memcmp(r.sent + 14, "*1\r\n$4\r\nROLE\r\n", 14) == 0);
    check_talk(CONF_CHECK_REDIS, "", "", CONF_ROLE_REPLICA,
               S("+PONG\r\n*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n"), false, HC_TALK_DONE, false,
               "Redis role master, check_role = replica");
    check_talk(CONF_CHECK_REDIS, "", "", CONF_ROLE_REPLICA,
               S("+PONG\r\n*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:6379\r\n"), false,
               HC_TALK_DONE, true, "Redis role slave");
    check_talk(CONF_CHECK_REDIS, "", "", CONF_ROLE_PRIMARY,
               S("+PONG\r\n*5\r\n$5\r\nslave\r\n"), false, HC_TALK_DONE, false,
               "Redis role slave, check_role = primary");
    check_talk(CONF_CHECK_REDIS, "", "", CONF_ROLE_PRIMARY, S("+PONG\r\n*3\r\n$6\r\nmas"), true,
               HC_TALK_DONE, false, "connection closed while waiting for the Redis ROLE answer");
    check_talk(CONF_CHECK_REDIS, "", "", CONF_ROLE_PRIMARY, S("+PONG\r\n:1\r\n"), false,
               HC_TALK_DONE, false, "Redis answered \":1\" to ROLE");
    check_talk(CONF_CHECK_REDIS, "", "", CONF_ROLE_PRIMARY, S("+PONG\r\n*3\r\n:1\r\n"), false,
               HC_TALK_DONE, false, "Redis ROLE answer starts with \":1\"");

    /* Foreign, truncated, endless. */
    check_talk(CONF_CHECK_REDIS, "", "", CONF_ROLE_ANY, S("HTTP/1.1 400 Bad Request\r\n"), false,
               HC_TALK_DONE, false, "Redis answered \"HTTP/1.1 400 Bad Request\" to PING");
    check_talk(CONF_CHECK_REDIS, "", "", CONF_ROLE_ANY, S("+PON"), true, HC_TALK_DONE, false,
               "connection closed while waiting for the Redis PONG");
    check_talk(CONF_CHECK_REDIS, "", "", CONF_ROLE_ANY, S("\r\n"), false, HC_TALK_DONE, false,
               "Redis sent an empty line while we waited for the Redis PONG");
    memset(big, 'x', sizeof(big));
    big[0] = '+';
    check_talk(CONF_CHECK_REDIS, "", "", CONF_ROLE_ANY, big, sizeof(big), false, HC_TALK_DONE,
               false, "Redis line longer than 1024 bytes (while waiting for the Redis PONG)");
    check_talk(CONF_CHECK_REDIS, "", "", CONF_ROLE_ANY, big, HC_TALK_IN_MAX - 1, false,
               HC_TALK_READ, false, NULL);
}

int
main(void)
{
    test_mysql();
    test_pgsql();
    test_redis();
    return CHECK_DONE();
}
