/* Tests health/agent.c: the reader of an agent's reply, fed whole and split
 * at every offset (and a byte at a time) with the same line or error; the
 * parser on each word, their combinations, errors and bounds. */
#include <string.h>

#include "agent.h"
#include "check.h"

#define S(lit) lit, sizeof(lit) - 1

/* ------------------------------------------------------------ the reader */

struct read_result {
    enum hc_agent_read state;
    size_t len;
    char line[HC_AGENT_LINE_MAX + 2];
    const char *error;
};

/* Feeds in[0..len) in pieces: the first cut at `cut`, then pieces of
 * `step` bytes; closed: then the agent closes. */
static struct read_result
read_split(const char *in, size_t len, size_t cut, size_t step, bool closed)
{
    struct hc_agent_reader r;
    struct read_result out;
    size_t off = 0;

    hc_agent_reader_init(&r);
    CHECK_EQ_INT(r.state, HC_AGENT_READ_MORE);
    if (cut > len)
        cut = len;
    hc_agent_reader_feed(&r, in, cut);
    off = cut;
    while (off < len) {
        size_t k = len - off < step ? len - off : step;

        hc_agent_reader_feed(&r, in + off, k);
        CHECK(r.len <= HC_AGENT_LINE_MAX + 1);
        off += k;
    }
    hc_agent_reader_feed(&r, "", 0);    /* a no-op */
    if (closed)
        CHECK(hc_agent_reader_eof(&r) != HC_AGENT_READ_MORE);
    memset(&out, 0, sizeof(out));
    out.state = r.state;
    out.len = r.len;
    memcpy(out.line, r.line, r.len);
    out.error = r.error;
    if (r.state == HC_AGENT_READ_LINE)
        CHECK_EQ_INT(r.line[r.len], '\0');
    if (r.state == HC_AGENT_READ_ERROR)
        CHECK(r.error != NULL && r.error[0] != '\0');
    return out;
}

/* Every split of in gives want (and want_line for a line, want_error for
 * an error): whole, cut at each offset, a byte at a time, 7 at a time. */
static void
check_read(const char *in, size_t len, bool closed, enum hc_agent_read want,
           const char *want_line, size_t want_len, const char *want_error)
{
    /* cut at each offset, the rest whole; then 1 and 7 bytes at a time */
    for (size_t k = 0; k <= len + 2; k++) {
        struct read_result r = k <= len ? read_split(in, len, k, len, closed)
                             : read_split(in, len, 0, k == len + 1 ? 1 : 7, closed);

        if (r.state != want)
            fprintf(stderr, "  read \"%.*s\" split %zu: state %d\n", (int)len, in, k,
                    (int)r.state);
        CHECK_EQ_INT(r.state, want);
        if (want == HC_AGENT_READ_LINE) {
            CHECK_EQ_INT(r.len, want_len);
            CHECK(memcmp(r.line, want_line, want_len) == 0);
        }
        if (want == HC_AGENT_READ_ERROR)
            CHECK_EQ_STR(r.error, want_error);
    }
}

static void
test_reader(void)
{
    char big[HC_AGENT_LINE_MAX + 8];
    static const char too_long[] = "agent reply longer than 256 bytes";

    check_read(S("up\n"), false, HC_AGENT_READ_LINE, S("up"), NULL);
    check_read(S("up\r\n"), false, HC_AGENT_READ_LINE, S("up"), NULL);
    check_read(S("up 50% maxconn:5 #busy\r\n"), false, HC_AGENT_READ_LINE,
               S("up 50% maxconn:5 #busy"), NULL);
    /* only the first line; what follows is ignored, even at a close */
    check_read(S("drain\nup\n"), true, HC_AGENT_READ_LINE, S("drain"), NULL);
    check_read(S("drain\n" "garbage that never ends"), false, HC_AGENT_READ_LINE, S("drain"),
               NULL);
    /* one '\r' before the '\n' is dropped, any other stays in the line */
    check_read(S("up\r\r\n"), false, HC_AGENT_READ_LINE, S("up\r"), NULL);
    check_read(S("u\rp\n"), false, HC_AGENT_READ_LINE, S("u\rp"), NULL);
    check_read(S("\n"), false, HC_AGENT_READ_LINE, S(""), NULL);
    check_read(S("\r\n"), false, HC_AGENT_READ_LINE, S(""), NULL);
    /* NUL bytes are bytes of the line */
    check_read(S("a\0b\n"), false, HC_AGENT_READ_LINE, S("a\0b"), NULL);
    /* no '\n' yet: more */
    check_read(S("up 50%"), false, HC_AGENT_READ_MORE, NULL, 0, NULL);
    check_read(S(""), false, HC_AGENT_READ_MORE, NULL, 0, NULL);
    check_read(S("up\r"), false, HC_AGENT_READ_MORE, NULL, 0, NULL);
    /* closed before a '\n': the line, its trailing '\r' dropped */
    check_read(S("up 50%"), true, HC_AGENT_READ_LINE, S("up 50%"), NULL);
    check_read(S("up\r"), true, HC_AGENT_READ_LINE, S("up"), NULL);
    check_read(S("\r"), true, HC_AGENT_READ_LINE, S(""), NULL);
    /* closed having said nothing: an error (changes nothing) */
    check_read(S(""), true, HC_AGENT_READ_ERROR, NULL, 0,
               "agent closed the connection without a reply");

    /* 256 bytes is the longest line, with or without its "\r\n" */
    memset(big, 'x', sizeof(big));
    big[HC_AGENT_LINE_MAX] = '\n';
    check_read(big, HC_AGENT_LINE_MAX + 1, false, HC_AGENT_READ_LINE, big, HC_AGENT_LINE_MAX,
               NULL);
    check_read(big, HC_AGENT_LINE_MAX, true, HC_AGENT_READ_LINE, big, HC_AGENT_LINE_MAX, NULL);
    big[HC_AGENT_LINE_MAX] = '\r';
    big[HC_AGENT_LINE_MAX + 1] = '\n';
    check_read(big, HC_AGENT_LINE_MAX + 2, false, HC_AGENT_READ_LINE, big, HC_AGENT_LINE_MAX,
               NULL);
    check_read(big, HC_AGENT_LINE_MAX + 1, true, HC_AGENT_READ_LINE, big, HC_AGENT_LINE_MAX,
               NULL);
    /* 257: too long, however it ends or does not */
    memset(big, 'x', sizeof(big));
    big[HC_AGENT_LINE_MAX + 1] = '\n';
    check_read(big, HC_AGENT_LINE_MAX + 2, false, HC_AGENT_READ_ERROR, NULL, 0, too_long);
    check_read(big, HC_AGENT_LINE_MAX + 1, true, HC_AGENT_READ_ERROR, NULL, 0, too_long);
    big[HC_AGENT_LINE_MAX + 1] = '\r';
    big[HC_AGENT_LINE_MAX + 2] = '\n';
    check_read(big, HC_AGENT_LINE_MAX + 3, false, HC_AGENT_READ_ERROR, NULL, 0, too_long);
    /* 256 and a '\r' not followed by '\n': the '\r' is the 257th byte */
    memset(big, 'x', sizeof(big));
    big[HC_AGENT_LINE_MAX] = '\r';
    big[HC_AGENT_LINE_MAX + 1] = 'x';
    check_read(big, HC_AGENT_LINE_MAX + 2, false, HC_AGENT_READ_ERROR, NULL, 0, too_long);
    /* endless: an error as soon as it is too long, and it stays one */
    check_read(big, sizeof(big), false, HC_AGENT_READ_ERROR, NULL, 0, too_long);

    /* after the line or an error, the reader holds its state */
    struct hc_agent_reader r;

    hc_agent_reader_init(&r);
    CHECK_EQ_INT(hc_agent_reader_feed(&r, S("up\nx")), HC_AGENT_READ_LINE);
    CHECK_EQ_INT(hc_agent_reader_feed(&r, S("yyy\n")), HC_AGENT_READ_LINE);
    CHECK_EQ_INT(hc_agent_reader_eof(&r), HC_AGENT_READ_LINE);
    CHECK_EQ_INT(r.len, 2);
    CHECK_EQ_STR(r.line, "up");
    hc_agent_reader_init(&r);
    CHECK_EQ_INT(hc_agent_reader_eof(&r), HC_AGENT_READ_ERROR);
    CHECK_EQ_INT(hc_agent_reader_feed(&r, S("up\n")), HC_AGENT_READ_ERROR);
}

/* ------------------------------------------------------------ the parser */

static struct hc_agent_reply
parse_ok(const char *line, size_t len)
{
    struct hc_agent_reply out;
    char err[160] = "";

    if (hc_agent_parse(line, len, &out, err, sizeof(err)) != 0) {
        fprintf(stderr, "  parse \"%.*s\": %s\n", (int)len, line, err);
        CHECK(!"parse failed");
    }
    return out;
}

/* An error: err is want, and the reply is empty (it changes nothing). */
static void
check_error(const char *line, size_t len, const char *want)
{
    static const struct hc_agent_reply empty;
    struct hc_agent_reply out;
    char err[160] = "";

    memset(&out, 0x5a, sizeof(out));
    CHECK_EQ_INT(hc_agent_parse(line, len, &out, err, sizeof(err)), -1);
    CHECK_EQ_STR(err, want);
    CHECK(memcmp(&out, &empty, sizeof(out)) == 0);
    for (const char *p = err; *p != '\0'; p++)
        CHECK(*p >= 0x20 && *p < 0x7f);
    /* with no room for a message, the verdict is the same */
    CHECK_EQ_INT(hc_agent_parse(line, len, &out, NULL, 0), -1);
}

#define PARSE(lit) parse_ok(S(lit))
#define ERROR(lit, want) check_error(S(lit), want)

static void
test_states(void)
{
    static const struct { const char *word; enum hc_agent_state state; } t[] = {
        { "up", HC_AGENT_STATE_UP },       { "ready", HC_AGENT_STATE_READY },
        { "down", HC_AGENT_STATE_DOWN },   { "drain", HC_AGENT_STATE_DRAIN },
        { "maint", HC_AGENT_STATE_MAINT }, { "UP", HC_AGENT_STATE_UP },
        { "Ready", HC_AGENT_STATE_READY }, { "DoWn", HC_AGENT_STATE_DOWN },
        { "DRAIN", HC_AGENT_STATE_DRAIN }, { "mAINT", HC_AGENT_STATE_MAINT },
    };

    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        struct hc_agent_reply r = parse_ok(t[i].word, strlen(t[i].word));

        CHECK_EQ_INT(r.state, t[i].state);
        CHECK(!r.has_percent && !r.has_maxconn && !r.has_note);
    }
    CHECK_EQ_STR(hc_agent_state_name(HC_AGENT_STATE_NONE), "none");
    CHECK_EQ_STR(hc_agent_state_name(HC_AGENT_STATE_UP), "up");
    CHECK_EQ_STR(hc_agent_state_name(HC_AGENT_STATE_READY), "ready");
    CHECK_EQ_STR(hc_agent_state_name(HC_AGENT_STATE_DOWN), "down");
    CHECK_EQ_STR(hc_agent_state_name(HC_AGENT_STATE_DRAIN), "drain");
    CHECK_EQ_STR(hc_agent_state_name(HC_AGENT_STATE_MAINT), "maint");
    CHECK_EQ_STR(hc_agent_state_name((enum hc_agent_state)99), "unknown");
}

static void
test_percent_and_maxconn(void)
{
    struct hc_agent_reply r;

    r = PARSE("50%");
    CHECK(r.has_percent && r.percent == 50 && r.state == HC_AGENT_STATE_NONE);
    r = PARSE("0%");
    CHECK(r.has_percent && r.percent == 0);
    r = PARSE("100%");
    CHECK(r.has_percent && r.percent == 100);
    r = PARSE("007%");
    CHECK(r.has_percent && r.percent == 7);
    r = PARSE("maxconn:5");
    CHECK(r.has_maxconn && r.maxconn == 5 && !r.has_percent);
    r = PARSE("MAXCONN:0");
    CHECK(r.has_maxconn && r.maxconn == 0);
    r = PARSE("maxconn:1000000");
    CHECK(r.has_maxconn && r.maxconn == 1000000);

    ERROR("101%", "agent reply: bad weight \"101%\" (0% to 100%)");
    ERROR("%", "agent reply: bad weight \"%\" (0% to 100%)");
    ERROR("-5%", "agent reply: bad weight \"-5%\" (0% to 100%)");
    ERROR("+5%", "agent reply: bad weight \"+5%\" (0% to 100%)");
    ERROR("50.5%", "agent reply: bad weight \"50.5%\" (0% to 100%)");
    ERROR("5%%", "agent reply: bad weight \"5%%\" (0% to 100%)");
    ERROR("99999999999999999999%",
          "agent reply: bad weight \"99999999999999999999%\" (0% to 100%)");
    ERROR("maxconn:", "agent reply: bad maxconn \"maxconn:\" (0 to 1000000)");
    ERROR("maxconn:1000001", "agent reply: bad maxconn \"maxconn:1000001\" (0 to 1000000)");
    ERROR("maxconn:x", "agent reply: bad maxconn \"maxconn:x\" (0 to 1000000)");
    ERROR("maxconn:-1", "agent reply: bad maxconn \"maxconn:-1\" (0 to 1000000)");
    ERROR("maxconn:18446744073709551621",
          "agent reply: bad maxconn \"maxconn:18446744073709551621\" (0 to 1000000)");
    /* a blank after the colon splits the word */
    ERROR("maxconn: 5", "agent reply: bad maxconn \"maxconn:\" (0 to 1000000)");
    ERROR("maxconn", "agent reply: unknown word \"maxconn\"");
    ERROR("50", "agent reply: unknown word \"50\"");
}

static void
test_notes(void)
{
    struct hc_agent_reply r;
    char line[HC_AGENT_LINE_MAX];

    r = PARSE("#busy");
    CHECK(r.has_note && r.state == HC_AGENT_STATE_NONE);
    CHECK_EQ_STR(r.note, "busy");
    /* its blanks around are cut, the rest is the note, words and all */
    r = PARSE("down # \t disk full, up 50% maxconn:x  \t");
    CHECK_EQ_INT(r.state, HC_AGENT_STATE_DOWN);
    CHECK(!r.has_percent && !r.has_maxconn);
    CHECK_EQ_STR(r.note, "disk full, up 50% maxconn:x");
    /* "#" alone: a note, empty (it clears the last one) */
    r = PARSE("up #");
    CHECK(r.has_note && r.state == HC_AGENT_STATE_UP);
    CHECK_EQ_STR(r.note, "");
    r = PARSE("up#busy");
    CHECK(r.has_note && r.state == HC_AGENT_STATE_UP);
    CHECK_EQ_STR(r.note, "busy");
    r = PARSE("##x");
    CHECK_EQ_STR(r.note, "#x");
    /* what is not printable ASCII is '?', a tab inside it too */
    r = parse_ok(S("#a\tb\x01\x7f\xc3\xa9\0z"));
    CHECK_EQ_STR(r.note, "a?b?????z");
    /* bounded: its first HC_AGENT_NOTE_MAX bytes */
    memset(line, 'n', sizeof(line));
    line[0] = '#';
    r = parse_ok(line, sizeof(line));
    CHECK_EQ_INT(strlen(r.note), HC_AGENT_NOTE_MAX);
    CHECK(r.note[0] == 'n' && r.note[HC_AGENT_NOTE_MAX - 1] == 'n');
    r = parse_ok(line, HC_AGENT_NOTE_MAX + 1);
    CHECK_EQ_INT(strlen(r.note), HC_AGENT_NOTE_MAX);
    r = parse_ok(line, HC_AGENT_NOTE_MAX);
    CHECK_EQ_INT(strlen(r.note), HC_AGENT_NOTE_MAX - 1);
}

static void
test_combinations(void)
{
    struct hc_agent_reply r;

    /* haproxy/haproxy#2039: one reply carries all of them */
    r = PARSE("up 50% maxconn:5 #busy");
    CHECK_EQ_INT(r.state, HC_AGENT_STATE_UP);
    CHECK(r.has_percent && r.percent == 50);
    CHECK(r.has_maxconn && r.maxconn == 5);
    CHECK(r.has_note);
    CHECK_EQ_STR(r.note, "busy");
    /* any order, any separators, repeated */
    r = PARSE(",, maxconn:7\t\t75%,DRAIN ,#x");
    CHECK_EQ_INT(r.state, HC_AGENT_STATE_DRAIN);
    CHECK(r.percent == 75 && r.maxconn == 7);
    CHECK_EQ_STR(r.note, "x");
    r = PARSE("0%,maint");
    CHECK(r.state == HC_AGENT_STATE_MAINT && r.has_percent && r.percent == 0);
    r = PARSE("ready\t100%");
    CHECK(r.state == HC_AGENT_STATE_READY && r.percent == 100 && !r.has_note);
    /* empty, or only separators: valid, nothing */
    r = PARSE("");
    CHECK(r.state == HC_AGENT_STATE_NONE && !r.has_percent && !r.has_maxconn && !r.has_note);
    r = PARSE(" ,\t, ");
    CHECK(r.state == HC_AGENT_STATE_NONE && !r.has_percent && !r.has_maxconn && !r.has_note);
    r = parse_ok(NULL, 0);
    CHECK(r.state == HC_AGENT_STATE_NONE);
}

static void
test_errors(void)
{
    char line[HC_AGENT_LINE_MAX];

    ERROR("fast", "agent reply: unknown word \"fast\"");
    ERROR("up fast 50%", "agent reply: unknown word \"fast\"");
    /* a good word before it changes nothing either: the reply is zeroed */
    ERROR("up 50% maxconn:5 fast #busy", "agent reply: unknown word \"fast\"");
    /* HAProxy's other health words are not ours */
    ERROR("fail", "agent reply: unknown word \"fail\"");
    ERROR("stopped", "agent reply: unknown word \"stopped\"");
    ERROR("upp", "agent reply: unknown word \"upp\"");
    ERROR("u", "agent reply: unknown word \"u\"");
    ERROR("up;", "agent reply: unknown word \"up;\"");
    /* the first error is the one named */
    ERROR("x 101%", "agent reply: unknown word \"x\"");
    ERROR("101% x", "agent reply: bad weight \"101%\" (0% to 100%)");
    /* one of each kind */
    ERROR("up drain", "agent reply: two states \"up\" and \"drain\"");
    ERROR("up UP", "agent reply: two states \"up\" and \"UP\"");
    ERROR("up ready", "agent reply: two states \"up\" and \"ready\"");
    ERROR("75%,maxconn:30,maint,down", "agent reply: two states \"maint\" and \"down\"");
    ERROR("50% 60%", "agent reply: two weights \"50%\" and \"60%\"");
    ERROR("maxconn:1 maxconn:1", "agent reply: two maxconns \"maxconn:1\" and \"maxconn:1\"");
    /* what is not printable is '?' in the message; a stray '\r' is a byte */
    ERROR("up\r", "agent reply: unknown word \"up?\"");
    check_error(S("a\0b"), "agent reply: unknown word \"a?b\"");
    ERROR("\xff\x1b[31m", "agent reply: unknown word \"??[31m\"");
    /* a long word is quoted in part */
    memset(line, 'w', sizeof(line));
    check_error(line, sizeof(line),
                "agent reply: unknown word \"wwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwww...\"");
    /* the message fits what the caller gives, cut */
    {
        struct hc_agent_reply out;
        char err[16];

        CHECK_EQ_INT(hc_agent_parse(S("fast"), &out, err, sizeof(err)), -1);
        CHECK_EQ_STR(err, "agent reply: un");
    }
}

/* The reader and the parser together, as the probe uses them, on every
 * split: the same reply. */
static void
test_read_then_parse(void)
{
    static const char in[] = "Up 50%,maxconn:5 # busy \r\nignored\n";
    struct hc_agent_reply whole;

    for (size_t cut = 0; cut < sizeof(in); cut++) {
        struct read_result rr = read_split(in, sizeof(in) - 1, cut, 1, true);
        struct hc_agent_reply r;

        CHECK_EQ_INT(rr.state, HC_AGENT_READ_LINE);
        r = parse_ok(rr.line, rr.len);
        if (cut == 0)
            whole = r;
        CHECK(memcmp(&r, &whole, sizeof(r)) == 0);
    }
    CHECK_EQ_INT(whole.state, HC_AGENT_STATE_UP);
    CHECK(whole.percent == 50 && whole.maxconn == 5);
    CHECK_EQ_STR(whole.note, "busy");
}

int
main(void)
{
    test_reader();
    test_states();
    test_percent_and_maxconn();
    test_notes();
    test_combinations();
    test_errors();
    test_read_then_parse();
    return CHECK_DONE();
}
