/*
 * fuzz_hc_grpc.c - what a grpc check reads from a server (health/grpc.c,
 * nghttp2 beneath it).
 *
 * The first byte picks the question (service, TLS's :scheme) and whether
 * the server closes after its bytes. The rest is what the server sends,
 * fed as the probe does (the output taken whole before each read), once
 * whole and once in pieces whose sizes come from the input. Both runs
 * must end alike, with the same verdict (below), and a detail of printable
 * ASCII: it goes into log lines and /stats.
 */
#include "fuzz.h"
#include "grpc.h"
#include "hc.h"

struct fuzz_run {
    bool has_verdict;
    bool passed;
    char detail[HC_DETAIL_MAX];
};

static void
fuzz_drain(struct hc_grpc *g)
{
    const uint8_t *out;
    size_t len;

    while ((len = hc_grpc_output(g, &out)) > 0)
        hc_grpc_sent(g, len);
}

static void
fuzz_grpc(struct fuzz_run *r, uint8_t pick, const uint8_t *data, size_t size, bool split)
{
    struct hc_grpc *g = hc_grpc_new("127.0.0.1:50051", pick & 1 ? "app.Svc" : "", pick & 2);
    const char *detail = "";
    size_t off = 0, k;

    FUZZ_CHECK(g != NULL);
    fuzz_drain(g);
    while (off < size && !hc_grpc_verdict(g, &r->passed, &detail)) {
        k = split ? 1 + data[off] % 16 : size - off;
        if (k > size - off)
            k = size - off;
        hc_grpc_feed(g, data + off, k);
        off += k;
        fuzz_drain(g);
    }
    if (pick & 0x80)
        hc_grpc_closed(g);
    r->has_verdict = hc_grpc_verdict(g, &r->passed, &detail);
    FUZZ_CHECK(strlen(hc_grpc_waiting_for(g)) > 0);
    if (r->has_verdict)
        hc_grpc_goodbye(g);
    fuzz_drain(g);
    snprintf(r->detail, sizeof(r->detail), "%s", r->has_verdict ? detail : "");
    if (!r->has_verdict)
        r->passed = false;
    for (const char *q = r->detail; *q != '\0'; q++)
        FUZZ_CHECK(*q >= 0x20 && *q < 0x7f);
    FUZZ_CHECK(!r->has_verdict || r->detail[0] != '\0');
    hc_grpc_free(g);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fuzz_run whole, split;

    if (size == 0)
        return 0;
    fuzz_grpc(&whole, data[0], data + 1, size - 1, false);
    fuzz_grpc(&split, data[0], data + 1, size - 1, true);
    FUZZ_CHECK(whole.has_verdict == split.has_verdict && whole.passed == split.passed);
    /* A failure may be worded after a different one of the server's
     * errors: nghttp2 acts on some when it reads them and on others when
     * its answer is sent, so a server that breaks HTTP/2 in two ways in
     * one segment is named for either. The verdict is the same. */
    FUZZ_CHECK(!whole.passed || strcmp(whole.detail, split.detail) == 0);
    return 0;
}
