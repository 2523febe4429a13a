/* Tests balancer/lines.c: a kind with a field of every type
 * (lines_fixture.h), its line formatted and parsed back, the records the
 * formatter refuses, and each refusal of the parser naming its field. */
#include <string.h>

#include "bal_lines.h"
#include "check.h"
#include "lines_fixture.h"

/* an enum of one name */
static const char *const one[] = { "only" };
static const struct bal_line_field one_fields[] = {
    BAL_LINE_ENUM_FIELD("it", struct rec, colour, one),
};
static const struct bal_line_kind one_kind = BAL_LINE_KIND("one", one_fields);

static const struct rec sample = {
    .name = "web-1", .u8 = 255, .u16 = 1000, .u32 = 4294967295u, .u64 = UINT64_MAX,
    .colour = BLUE, .is_on = true, .at_ms = 1796150000125,
};
#define SAMPLE_LINE "rec 1 web-1 255 u16=1000 4294967295 u64=18446744073709551615 " \
                    "colour=blue 1 1796150000.125"

static void
test_round_trip(void)
{
    struct rec back;
    char line[200], err[128];
    size_t n = bal_line_format(line, sizeof(line), &kind, &sample);

    CHECK_EQ_STR(line, SAMPLE_LINE "\n");
    CHECK_EQ_INT(n, strlen(SAMPLE_LINE) + 1);
    line[n - 1] = '\0';
    memset(&back, 0, sizeof(back));
    CHECK_EQ_INT(bal_line_parse(line, &kind, &back, err, sizeof(err)), 0);
    CHECK(memcmp(&sample, &back, sizeof(back)) == 0);
    /* exactly its length and the NUL fit, one byte fewer does not */
    CHECK_EQ_INT(bal_line_format(line, n + 1, &kind, &sample), n);
    for (size_t len = 0; len <= n; len++)
        CHECK_EQ_INT(bal_line_format(line, len, &kind, &sample), 0);
    CHECK_EQ_STR(line, "");             /* nothing half-written */
    /* the smallest values, and times read with fewer decimals */
    memset(&back, 0, sizeof(back));
    CHECK_EQ_INT(bal_line_parse("rec 1 x 0 u16=2 0 u64=0 colour=red 0 0", &kind, &back, err,
                                sizeof(err)), 0);
    CHECK(back.u16 == 2 && back.colour == RED && !back.is_on && back.at_ms == 0);
    CHECK_EQ_INT(bal_line_parse("rec 1 x 0 u16=2 0 u64=0 colour=red 0 17.5", &kind, &back, err,
                                sizeof(err)), 0);
    CHECK_EQ_INT(back.at_ms, 17500);
    CHECK_EQ_INT(bal_line_parse("rec 1 x 0 u16=2 0 u64=0 colour=red 0 17.05", &kind, &back,
                                err, sizeof(err)), 0);
    CHECK_EQ_INT(back.at_ms, 17050);
    CHECK_EQ_INT(bal_line_format(line, sizeof(line), &kind, &back), strlen(line));
    CHECK(strstr(line, " 17.050\n") != NULL);
    CHECK(bal_line_is("rec 1 x", &kind) && bal_line_is("rec 1", &kind));
    CHECK(!bal_line_is("rec 12 x", &kind) && !bal_line_is("rec", &kind) &&
          !bal_line_is("", &kind));
}

/* What lb would not read back, it does not write. */
static void
test_format_refused(void)
{
    static const struct { const char *what; struct rec r; } bad[] = {
        { "empty name", { .u16 = 2 } },
        { "blank in a name", { .name = "a b", .u16 = 2 } },
        { "tab in a name", { .name = "a\tb", .u16 = 2 } },
        { "DEL in a name", { .name = "a\x7f", .u16 = 2 } },
        { "name without its NUL", { .name = { 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h' },
                                    .u16 = 2 } },
        { "u16 below min", { .name = "a", .u16 = 1 } },
        { "u16 above max", { .name = "a", .u16 = 1001 } },
        { "colour without a name", { .name = "a", .u16 = 2, .colour = GREEN } },
        { "colour past the table", { .name = "a", .u16 = 2, .colour = (enum colour)7 } },
    };
    char line[200];

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        strcpy(line, "x");
        CHECK_EQ_INT(bal_line_format(line, sizeof(line), &kind, &bad[i].r), 0);
        CHECK_EQ_STR(line, "");
        if (line[0] != '\0')
            fprintf(stderr, "  case: %s\n", bad[i].what);
    }
}

#define AT_ERR "at must be seconds from 0.000 to 18446744073709551.615, with up to 3 decimals"

static void
test_parse_refused(void)
{
    static const struct { const char *line, *err; } bad[] = {
        { "", "not a rec 1 line" },
        { "rec 2 a 1 u16=2 1 u64=1 colour=red 1 1", "not a rec 1 line" },
        { "rec 1", "name missing" },
        { "rec 1 a 1 u16=2", "u32 missing" },
        { "rec 1  a 1 u16=2 1 u64=1 colour=red 1 1", "name must be 1 to 7 bytes, without blanks" },
        { "rec 1 abcdefgh 1 u16=2 1 u64=1 colour=red 1 1",
          "name must be 1 to 7 bytes, without blanks" },
        { "rec 1 a\x01 1 u16=2 1 u64=1 colour=red 1 1",
          "name must be 1 to 7 bytes, without blanks" },
        { "rec 1 a 256 u16=2 1 u64=1 colour=red 1 1", "u8 must be a number from 0 to 255" },
        { "rec 1 a -1 u16=2 1 u64=1 colour=red 1 1", "u8 must be a number from 0 to 255" },
        { "rec 1 a +1 u16=2 1 u64=1 colour=red 1 1", "u8 must be a number from 0 to 255" },
        { "rec 1 a 01 u16=2 1 u64=1 colour=red 1 1", "u8 must be a number from 0 to 255" },
        { "rec 1 a 1 u16=1 1 u64=1 colour=red 1 1", "u16= must be a number from 2 to 1000" },
        { "rec 1 a 1 u16=1001 1 u64=1 colour=red 1 1", "u16= must be a number from 2 to 1000" },
        { "rec 1 a 1 u16= 1 u64=1 colour=red 1 1", "u16= must be a number from 2 to 1000" },
        { "rec 1 a 1 u17=2 1 u64=1 colour=red 1 1", "expected u16=" },
        { "rec 1 a 1 u16 1 u64=1 colour=red 1 1", "expected u16=" },
        { "rec 1 a 1 u16=2 4294967296 u64=1 colour=red 1 1",
          "u32 must be a number from 0 to 4294967295" },
        { "rec 1 a 1 u16=2 1 u64=18446744073709551616 colour=red 1 1",
          "u64= must be a number from 0 to 18446744073709551615" },
        { "rec 1 a 1 u16=2 1 u64=99999999999999999999 colour=red 1 1",
          "u64= must be a number from 0 to 18446744073709551615" },
        { "rec 1 a 1 u16=2 1 u64=1 colour=green 1 1", "colour= must be red or blue" },
        { "rec 1 a 1 u16=2 1 u64=1 colour=Red 1 1", "colour= must be red or blue" },
        { "rec 1 a 1 u16=2 1 u64=1 colour=redd 1 1", "colour= must be red or blue" },
        { "rec 1 a 1 u16=2 1 u64=1 colour=red 2 1", "on must be a number from 0 to 1" },
        { "rec 1 a 1 u16=2 1 u64=1 colour=red 1 1.", AT_ERR },
        { "rec 1 a 1 u16=2 1 u64=1 colour=red 1 1.2345",
          AT_ERR },
        { "rec 1 a 1 u16=2 1 u64=1 colour=red 1 .5", AT_ERR },
        { "rec 1 a 1 u16=2 1 u64=1 colour=red 1 1.5x",
          AT_ERR },
        { "rec 1 a 1 u16=2 1 u64=1 colour=red 1 1e3", AT_ERR },
        { "rec 1 a 1 u16=2 1 u64=1 colour=red 1 18446744073709551.616",
          AT_ERR },
        { "rec 1 a 1 u16=2 1 u64=1 colour=red 1 1 ", "unexpected text after at" },
        { "rec 1 a 1 u16=2 1 u64=1 colour=red 1 1 more", "unexpected text after at" },
    };
    struct rec r;
    char err[128];

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        CHECK_EQ_INT(bal_line_parse(bad[i].line, &kind, &r, err, sizeof(err)), -1);
        CHECK_EQ_STR(err, bad[i].err);
    }
    /* the largest time there is, and one more millisecond */
    CHECK_EQ_INT(bal_line_parse("rec 1 a 1 u16=2 1 u64=1 colour=red 1 18446744073709551.615",
                                &kind, &r, err, sizeof(err)), 0);
    CHECK(r.at_ms == UINT64_MAX);
    CHECK_EQ_INT(bal_line_parse("one x", &one_kind, &r, err, sizeof(err)), -1);
    CHECK_EQ_STR(err, "it must be only");
    /* an error longer than its buffer is cut, NUL-ended */
    CHECK_EQ_INT(bal_line_parse("rec 1 a 1 u16=2 1 u64=1 colour=x 1 1", &kind, &r, err, 12), -1);
    CHECK_EQ_STR(err, "colour= mus");
}

int
main(void)
{
    test_round_trip();
    test_format_refused();
    test_parse_refused();
    return CHECK_DONE();
}
