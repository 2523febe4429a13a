/*
 * fuzz_hc_talk.c - what a mysql, pgsql or redis check reads from a server
 * (health/talk*.c).
 *
 * The first byte picks the check: the kind, whether it logs in, the role.
 * The rest is what the server sends, fed as the probe would (sending when
 * asked), once whole and once in pieces whose sizes come from the input.
 * The conversation must end or wait in both runs alike, with the same
 * verdict, keep within its buffers, and give a detail of printable ASCII:
 * it goes into log lines and /stats.
 */
#include "fuzz.h"
#include "talk.h"

struct fuzz_run {
    enum hc_talk_next next;
    bool passed;
    char detail[HC_DETAIL_MAX];
};

static void
fuzz_talk(struct fuzz_run *r, uint8_t pick, const uint8_t *data, size_t size, bool split)
{
    static const enum conf_check kinds[] = { CONF_CHECK_MYSQL, CONF_CHECK_PGSQL, CONF_CHECK_REDIS };
    static const enum conf_role roles[] = { CONF_ROLE_ANY, CONF_ROLE_PRIMARY, CONF_ROLE_REPLICA };
    struct hc_talk t;
    enum hc_talk_next next = hc_talk_begin(&t, kinds[pick % 3], (pick / 3) % 2 ? "lb_check" : "",
                                           (pick / 6) % 2 ? "app" : "", roles[(pick / 12) % 3]);
    size_t off = 0, k;

    for (;;) {
        FUZZ_CHECK(t.in_len <= HC_TALK_IN_MAX && t.out_len <= HC_TALK_OUT_MAX);
        if (next == HC_TALK_DONE)
            break;
        if (next == HC_TALK_SEND) {
            FUZZ_CHECK(t.out_len > 0);
            t.out_len = 0;
            next = t.in_len > 0 ? hc_talk_feed(&t, NULL, 0) : HC_TALK_READ;
            continue;
        }
        if (off == size) {
            next = pick & 0x80 ? hc_talk_closed(&t) : HC_TALK_READ;
            if (next == HC_TALK_READ)
                break;
            continue;
        }
        FUZZ_CHECK(hc_talk_room(&t) > 0);
        k = split ? 1 + data[off] % 16 : size - off;
        if (k > size - off)
            k = size - off;
        if (k > hc_talk_room(&t))
            k = hc_talk_room(&t);
        next = hc_talk_feed(&t, data + off, k);
        off += k;
    }
    r->next = next;
    r->passed = next == HC_TALK_DONE && t.passed;
    snprintf(r->detail, sizeof(r->detail), "%s", next == HC_TALK_DONE ? t.detail : "");
    for (const char *q = r->detail; *q != '\0'; q++)
        FUZZ_CHECK(*q >= 0x20 && *q < 0x7f);
    FUZZ_CHECK(next != HC_TALK_DONE || r->detail[0] != '\0');
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_run whole, split;

    if (size == 0)
        return 0;
    fuzz_talk(&whole, data[0], data + 1, size - 1, false);
    fuzz_talk(&split, data[0], data + 1, size - 1, true);
    FUZZ_CHECK(whole.next == split.next && whole.passed == split.passed);
    FUZZ_CHECK(strcmp(whole.detail, split.detail) == 0);
    return 0;
}
