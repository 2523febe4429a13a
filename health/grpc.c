/*
 * grpc.c - grpc.health.v1.Health/Check over HTTP/2, in memory.
 *
 * nghttp2 does the HTTP/2 (framing, HPACK, flow control, the checks of RFC
 * 9113's messaging rules); this file asks one question and reads the
 * answer:
 *
 *   client: preface, SETTINGS, HEADERS (POST /grpc.health.v1.Health/Check),
 *           DATA (a length-prefixed HealthCheckRequest{service}), END_STREAM
 *   server: SETTINGS, HEADERS (:status 200, content-type application/grpc),
 *           DATA (HealthCheckResponse{status}), HEADERS (grpc-status 0)
 *
 * or, refusing, a single HEADERS with :status and grpc-status together
 * (gRPC's Trailers-Only). The verdict is made when the stream closes, from
 * what came on it; before that, a connection the server or nghttp2 ended
 * (GOAWAY, a framing error) fails with the reason.
 *
 * The protobuf of the two messages is a field or two, written and read by
 * hand here: a library for it would be larger than the check.
 */
#include "grpc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nghttp2/nghttp2.h>

#include "conf.h"
#include "hc.h"
#include "talk.h"

/* Sent at once: the preface (24), SETTINGS (27), HEADERS (~100 with the
 * longest authority) and DATA (9 + 5 + 131). More waits in nghttp2. */
#define HC_GRPC_OUT_MAX 1024
/* What the server may send on the stream before we read it: the answer
 * is a few bytes, so a small window keeps nghttp2 from buffering more. */
#define HC_GRPC_WINDOW 4096

struct hc_grpc {
    nghttp2_session *session;
    int32_t stream_id;
    bool has_verdict;
    bool passed;
    bool has_headers;               /* the response's first HEADERS came */
    bool is_reset_by_server;        /* an RST_STREAM frame came */
    uint32_t goaway_code;           /* a GOAWAY's, when has_goaway */
    bool has_goaway;
    int http_status;                /* 0 = none yet */
    int grpc_status;                /* -1 = none */
    size_t in_total;                /* bytes fed, for HC_GRPC_IN_MAX */
    unsigned char first[5];         /* the first bytes fed: "HTTP/" is a
                                       server that does not speak h2c */
    size_t message_len;             /* DATA bytes, all of them counted */
    size_t out_len, out_sent;
    size_t request_len, request_sent;
    char detail[HC_DETAIL_MAX];
    char error[96];                 /* nghttp2's last word on an error */
    char grpc_message[96];
    unsigned char message[HC_GRPC_MESSAGE_MAX];
    /* the request's DATA: 5-byte prefix, field 1 (tag, length, name) */
    unsigned char request[5 + 3 + CONF_CHECK_NAME_MAX];
    uint8_t out[HC_GRPC_OUT_MAX];
    char authority[256];
    bool is_tls;
};

static const char *const hc_grpc_codes[] = {
    "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
    "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
    "UNAUTHENTICATED",
};

/* HealthCheckResponse.ServingStatus */
static const char *const hc_grpc_serving[] = {
    "UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN",
};

static void hc_grpc_decide(struct hc_grpc *g, bool passed, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void hc_grpc_fail_session(struct hc_grpc *g);

static void
hc_grpc_decide(struct hc_grpc *g, bool passed, const char *fmt, ...)
{
    va_list ap;

    if (g->has_verdict)
        return;                     /* the first reason is the one */
    g->has_verdict = true;
    g->passed = passed;
    va_start(ap, fmt);
    vsnprintf(g->detail, sizeof(g->detail), fmt, ap);
    va_end(ap);
}

/* --------------------------------------------------------------- protobuf */

static bool
hc_grpc_varint(const unsigned char **p, const unsigned char *end, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 64 && *p < end; shift += 7) {
        unsigned char b = *(*p)++;

        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return true;
    }
    return false;
}

/* The status field (1) of a HealthCheckResponse; other fields are passed
 * over, as protobuf wants of a reader older than the writer. Proto3 leaves
 * a field at its default out: no field 1 is UNKNOWN (0). -1 if malformed. */
static int64_t
hc_grpc_serving_status(const unsigned char *p, size_t len)
{
    const unsigned char *end = p + len;
    uint64_t key, v, status = 0;

    while (p < end) {
        if (!hc_grpc_varint(&p, end, &key))
            return -1;
        switch (key & 7) {
        case 0:                             /* varint */
            if (!hc_grpc_varint(&p, end, &v))
                return -1;
            if (key >> 3 == 1)
                status = v;
            break;
        case 1:                             /* 64-bit */
            if (end - p < 8)
                return -1;
            p += 8;
            break;
        case 2:                             /* length-delimited */
            if (!hc_grpc_varint(&p, end, &v) || v > (uint64_t)(end - p))
                return -1;
            p += v;
            break;
        case 5:                             /* 32-bit */
            if (end - p < 4)
                return -1;
            p += 4;
            break;
        default:
            return -1;
        }
    }
    return status > INT32_MAX ? -1 : (int64_t)status;
}

/* The response's one length-prefixed message -> the verdict. */
static void
hc_grpc_read_message(struct hc_grpc *g)
{
    const unsigned char *m = g->message;
    uint32_t len;
    int64_t status;

    if (g->message_len == 0) {
        hc_grpc_decide(g, false, "grpc-status 0 without a response message");
        return;
    }
    if (g->message_len > sizeof(g->message)) {
        hc_grpc_decide(g, false, "response message of %zu bytes, more than %d",
                       g->message_len, HC_GRPC_MESSAGE_MAX);
        return;
    }
    if (g->message_len < 5) {
        hc_grpc_decide(g, false, "malformed response: %zu bytes, a message prefix is 5",
                       g->message_len);
        return;
    }
    len = (uint32_t)m[1] << 24 | (uint32_t)m[2] << 16 | (uint32_t)m[3] << 8 | m[4];
    if (m[0] != 0) {
        /* no grpc-accept-encoding was sent: a server may not compress */
        hc_grpc_decide(g, false, "malformed response: a compressed message");
        return;
    }
    if (len != g->message_len - 5) {
        hc_grpc_decide(g, false, "malformed response: a message of %u bytes in %zu",
                       len, g->message_len - 5);
        return;
    }
    status = hc_grpc_serving_status(m + 5, len);
    if (status < 0)
        hc_grpc_decide(g, false, "malformed response: not a HealthCheckResponse");
    else if (status < 4)
        hc_grpc_decide(g, status == 1, "%s", hc_grpc_serving[status]);
    else
        hc_grpc_decide(g, false, "serving status %lld", (long long)status);
}

/* ------------------------------------------------------ nghttp2's callbacks */

static ssize_t
hc_grpc_on_send(nghttp2_session *s, const uint8_t *data, size_t len, int flags, void *arg)
{
    struct hc_grpc *g = arg;
    size_t room = sizeof(g->out) - g->out_len;

    if (room == 0)
        return NGHTTP2_ERR_WOULDBLOCK;
    if (len > room)
        len = room;
    memcpy(g->out + g->out_len, data, len);
    g->out_len += len;
    return (ssize_t)len;
}

static ssize_t
hc_grpc_on_read_request(nghttp2_session *s, int32_t stream_id, uint8_t *buf, size_t len,
                        uint32_t *flags, nghttp2_data_source *src, void *arg)
{
    struct hc_grpc *g = arg;
    size_t left = g->request_len - g->request_sent;

    if (len > left)
        len = left;
    memcpy(buf, g->request + g->request_sent, len);
    g->request_sent += len;
    if (g->request_sent == g->request_len)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)len;
}

static bool
hc_grpc_name_is(const uint8_t *name, size_t len, const char *want)
{
    return len == strlen(want) && memcmp(name, want, len) == 0;
}

/* grpc-message is percent-encoded (gRPC's PROTOCOL-HTTP2); decoded, then
 * made printable for logs and JSON. */
static void
hc_grpc_set_message(struct hc_grpc *g, const uint8_t *v, size_t len)
{
    unsigned char text[sizeof(g->grpc_message)];
    size_t n = 0;

    for (size_t i = 0; i < len && n < sizeof(text); i++) {
        unsigned hex;

        if (v[i] == '%' && i + 2 < len && sscanf((const char *)v + i + 1, "%2x", &hex) == 1) {
            text[n++] = (unsigned char)hex;
            i += 2;
        } else {
            text[n++] = v[i];
        }
    }
    hc_talk_text(g->grpc_message, sizeof(g->grpc_message), text, n);
}

/* Response headers, and trailers, and both at once (Trailers-Only): any
 * of them may carry grpc-status. nghttp2 has already checked the fields
 * against HTTP/2's rules. */
static int
hc_grpc_on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name,
                  size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                  void *arg)
{
    struct hc_grpc *g = arg;
    char num[12];

    if (f->hd.type != NGHTTP2_HEADERS || f->hd.stream_id != g->stream_id)
        return 0;
    if (hc_grpc_name_is(name, namelen, ":status") ||
        hc_grpc_name_is(name, namelen, "grpc-status")) {
        int v = 0;

        if (valuelen == 0 || valuelen >= sizeof(num))
            v = -1;
        for (size_t i = 0; v >= 0 && i < valuelen; i++)
            v = value[i] >= '0' && value[i] <= '9' ? v * 10 + (value[i] - '0') : -1;
        if (name[0] == ':')
            g->http_status = v < 0 ? 1 : v;    /* 1: there, but not a number */
        else
            g->grpc_status = v < 0 ? INT32_MAX : v;
    } else if (hc_grpc_name_is(name, namelen, "grpc-message")) {
        hc_grpc_set_message(g, value, valuelen);
    }
    return 0;
}

static int
hc_grpc_on_data(nghttp2_session *s, uint8_t flags, int32_t stream_id, const uint8_t *data,
                size_t len, void *arg)
{
    struct hc_grpc *g = arg;

    if (stream_id != g->stream_id)
        return 0;
    if (g->message_len < sizeof(g->message))
        memcpy(g->message + g->message_len, data,
               len < sizeof(g->message) - g->message_len ? len
                                                         : sizeof(g->message) - g->message_len);
    g->message_len += len;
    return 0;
}

static int
hc_grpc_on_frame(nghttp2_session *s, const nghttp2_frame *f, void *arg)
{
    struct hc_grpc *g = arg;

    switch (f->hd.type) {
    case NGHTTP2_HEADERS:
        if (f->hd.stream_id == g->stream_id)
            g->has_headers = true;
        break;
    case NGHTTP2_RST_STREAM:
        if (f->hd.stream_id == g->stream_id)
            g->is_reset_by_server = true;
        break;
    case NGHTTP2_GOAWAY:
        g->has_goaway = true;
        g->goaway_code = f->goaway.error_code;
        break;
    default:
        break;
    }
    return 0;
}

/* The stream's end: the verdict from what came on it. */
static int
hc_grpc_on_stream_close(nghttp2_session *s, int32_t stream_id, uint32_t code, void *arg)
{
    struct hc_grpc *g = arg;

    if (stream_id != g->stream_id)
        return 0;
    if (g->error[0] != '\0')             /* nghttp2 found it first */
        hc_grpc_fail_session(g);
    else if (code != NGHTTP2_NO_ERROR && g->is_reset_by_server)
        hc_grpc_decide(g, false, "the server reset the stream (%s)", nghttp2_http2_strerror(code));
    else if (code != NGHTTP2_NO_ERROR)
        hc_grpc_fail_session(g);
    else if (g->http_status != 200 && g->grpc_status < 0)
        hc_grpc_decide(g, false, "HTTP status %d, not a gRPC answer", g->http_status);
    else if (g->grpc_status < 0)
        hc_grpc_decide(g, false, "no grpc-status in the answer");
    else if (g->grpc_status == INT32_MAX)
        hc_grpc_decide(g, false, "grpc-status is not a number");
    else if (g->grpc_status != 0)
        hc_grpc_decide(g, false, "%d %s%s%s", g->grpc_status,
                       g->grpc_status < (int)(sizeof(hc_grpc_codes) / sizeof(hc_grpc_codes[0]))
                           ? hc_grpc_codes[g->grpc_status] : "(unknown code)",
                       g->grpc_message[0] != '\0' ? ": " : "", g->grpc_message);
    else
        hc_grpc_read_message(g);
    return 0;
}

static int
hc_grpc_on_error(nghttp2_session *s, int lib_error, const char *msg, size_t len, void *arg)
{
    struct hc_grpc *g = arg;

    hc_talk_text(g->error, sizeof(g->error), (const unsigned char *)msg, len);
    return 0;
}

/* ------------------------------------------------------------ the exchange */

static int
hc_grpc_start(struct hc_grpc *g, const char *service)
{
    size_t slen = strlen(service);
    size_t vlen = slen < 0x80 ? 1 : 2;      /* the length's varint */
    size_t mlen = slen > 0 ? 1 + vlen + slen : 0;
    nghttp2_settings_entry settings[] = {
        { NGHTTP2_SETTINGS_ENABLE_PUSH, 0 },
        { NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 0 },     /* no pushes */
        { NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, HC_GRPC_WINDOW },
        { NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, 8192 },
    };
#define HC_GRPC_NV(n, v) { (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), \
                           NGHTTP2_NV_FLAG_NO_COPY_NAME }
    const nghttp2_nv headers[] = {
        HC_GRPC_NV(":method", "POST"),
        HC_GRPC_NV(":scheme", g->is_tls ? "https" : "http"),
        HC_GRPC_NV(":authority", g->authority),
        HC_GRPC_NV(":path", "/grpc.health.v1.Health/Check"),
        HC_GRPC_NV("content-type", "application/grpc"),
        HC_GRPC_NV("te", "trailers"),
        HC_GRPC_NV("user-agent", "lb-health"),
    };
#undef HC_GRPC_NV
    const nghttp2_data_provider body = { .read_callback = hc_grpc_on_read_request };

    if (slen > CONF_CHECK_NAME_MAX)
        return -1;
    g->request[0] = 0;                      /* not compressed */
    g->request[1] = g->request[2] = g->request[3] = 0;
    g->request[4] = (unsigned char)mlen;
    if (slen > 0) {
        g->request[5] = 0x0a;               /* field 1, length-delimited */
        g->request[6] = (unsigned char)(slen & 0x7f) | (vlen > 1 ? 0x80 : 0);
        g->request[7] = (unsigned char)(slen >> 7);     /* when vlen is 2 */
        memcpy(g->request + 5 + 1 + vlen, service, slen);
    }
    g->request_len = 5 + mlen;
    if (nghttp2_submit_settings(g->session, NGHTTP2_FLAG_NONE, settings,
                                sizeof(settings) / sizeof(settings[0])) != 0)
        return -1;
    g->stream_id = nghttp2_submit_request(g->session, NULL, headers,
                                          sizeof(headers) / sizeof(headers[0]), &body, NULL);
    return g->stream_id > 0 ? 0 : -1;
}

struct hc_grpc *
hc_grpc_new(const char *authority, const char *service, bool is_tls)
{
    struct hc_grpc *g = calloc(1, sizeof(*g));
    nghttp2_session_callbacks *cb = NULL;
    nghttp2_option *opt = NULL;
    int rc = -1;

    if (g == NULL)
        return NULL;
    g->grpc_status = -1;
    g->is_tls = is_tls;
    snprintf(g->authority, sizeof(g->authority), "%s", authority);
    if (nghttp2_session_callbacks_new(&cb) != 0 || nghttp2_option_new(&opt) != 0)
        goto out;
    nghttp2_session_callbacks_set_send_callback(cb, hc_grpc_on_send);
    nghttp2_session_callbacks_set_on_header_callback(cb, hc_grpc_on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, hc_grpc_on_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, hc_grpc_on_frame);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, hc_grpc_on_stream_close);
    nghttp2_session_callbacks_set_error_callback2(cb, hc_grpc_on_error);
    /* A handful of SETTINGS entries is all a server needs to send. */
    nghttp2_option_set_max_settings(opt, 32);
    if (nghttp2_session_client_new2(&g->session, cb, g, opt) != 0)
        goto out;
    rc = hc_grpc_start(g, service);
out:
    nghttp2_session_callbacks_del(cb);
    nghttp2_option_del(opt);
    if (rc == -1) {
        hc_grpc_free(g);
        return NULL;
    }
    return g;
}

void
hc_grpc_free(struct hc_grpc *g)
{
    if (g == NULL)
        return;
    nghttp2_session_del(g->session);
    free(g);
}

/* An error nghttp2 found in what the server sent, on the stream or the
 * connection: its own words when it gave them, or, when the server's
 * first bytes were an HTTP/1 status line, that (a web server, not h2c).
 * Which of nghttp2's paths reports it first depends on how the bytes
 * were split, so they all say the same. */
static void
hc_grpc_fail_session(struct hc_grpc *g)
{
    if (g->in_total >= sizeof(g->first) && memcmp(g->first, "HTTP/", 5) == 0)
        hc_grpc_decide(g, false, "the server answered HTTP/1, not HTTP/2");
    else
        hc_grpc_decide(g, false, "HTTP/2: %s",
                       g->error[0] != '\0' ? g->error : "the server broke the protocol");
}

/* Neither side has more to say and there is no verdict: the session
 * ended under the stream (a GOAWAY, a connection error nghttp2 found). */
static void
hc_grpc_check_session(struct hc_grpc *g)
{
    if (g->has_verdict || nghttp2_session_want_read(g->session) ||
        nghttp2_session_want_write(g->session))
        return;
    if (g->has_goaway && g->error[0] == '\0')
        hc_grpc_decide(g, false, "the server ended the session (GOAWAY %s)",
                       nghttp2_http2_strerror(g->goaway_code));
    else
        hc_grpc_fail_session(g);
}

size_t
hc_grpc_output(struct hc_grpc *g, const uint8_t **out)
{
    if (g->out_sent == g->out_len) {
        int rc;

        g->out_len = g->out_sent = 0;
        rc = nghttp2_session_send(g->session);
        if (rc != 0)
            hc_grpc_fail_session(g);
        hc_grpc_check_session(g);
    }
    *out = g->out + g->out_sent;
    return g->out_len - g->out_sent;
}

void
hc_grpc_sent(struct hc_grpc *g, size_t n)
{
    g->out_sent += n;
}

void
hc_grpc_feed(struct hc_grpc *g, const uint8_t *buf, size_t n)
{
    ssize_t rc;

    bool is_over = n > HC_GRPC_IN_MAX - g->in_total;

    if (g->has_verdict || n == 0)
        return;
    /* Up to the cap, wherever the bytes are split: the verdict must not
     * depend on how the server's bytes came (tests/fuzz/fuzz_hc_grpc.c). */
    if (is_over)
        n = HC_GRPC_IN_MAX - g->in_total;
    for (size_t i = 0; i < n && g->in_total + i < sizeof(g->first); i++)
        g->first[g->in_total + i] = buf[i];
    g->in_total += n;
    rc = nghttp2_session_mem_recv(g->session, buf, n);
    if (rc < 0)
        hc_grpc_fail_session(g);
    hc_grpc_check_session(g);
    if (is_over)
        hc_grpc_decide(g, false, "the server sent more than %d bytes", HC_GRPC_IN_MAX);
}

void
hc_grpc_closed(struct hc_grpc *g)
{
    if (g->error[0] != '\0')
        hc_grpc_fail_session(g);
    else if (g->has_goaway)
        hc_grpc_decide(g, false, "the server ended the session (GOAWAY %s)",
                       nghttp2_http2_strerror(g->goaway_code));
    else
        hc_grpc_decide(g, false, "connection closed before %s", hc_grpc_waiting_for(g));
}

bool
hc_grpc_verdict(const struct hc_grpc *g, bool *passed, const char **detail)
{
    if (!g->has_verdict)
        return false;
    *passed = g->passed;
    *detail = g->detail;
    return true;
}

void
hc_grpc_goodbye(struct hc_grpc *g)
{
    g->out_len = g->out_sent = 0;
    if (nghttp2_session_terminate_session(g->session, NGHTTP2_NO_ERROR) == 0)
        (void)nghttp2_session_send(g->session);
}

const char *
hc_grpc_waiting_for(const struct hc_grpc *g)
{
    if (g->in_total == 0)
        return "the server's HTTP/2 SETTINGS";
    return g->has_headers ? "the gRPC response trailers" : "the gRPC response headers";
}
