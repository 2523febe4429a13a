/*
 * etcd_watch.c - what etcd's v3 JSON gateway sends, read without I/O
 * (dsc_etcd.h): the watch stream cut into whole JSON objects, the watch,
 * range and authenticate answers, the request bodies, and the server a
 * key's value names. Pure: dsc_etcd.c does the talking, the unit test and
 * tests/fuzz/fuzz_etcd_watch.c link this file alone.
 *
 * The gateway (grpc-gateway) writes int64 fields as JSON strings
 * ("revision":"42") and bytes fields (keys, values) in base64; a field at
 * its zero value is left out ("created":false never appears).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "conf_value.h"                 /* conf_server_name_is_valid */
#include "dsc_etcd.h"

/* ---------------------------------------------------------- the stream */

void
dsc_etcd_stream_init(struct dsc_etcd_stream *s, size_t max)
{
    memset(s, 0, sizeof(*s));
    s->max = max;
}

void
dsc_etcd_stream_fini(struct dsc_etcd_stream *s)
{
    free(s->buf);
    memset(s, 0, sizeof(*s));
}

bool
dsc_etcd_stream_is_pending(const struct dsc_etcd_stream *s)
{
    return s->len > 0;
}

static int
dsc_etcd_stream_append(struct dsc_etcd_stream *s, const char *data, size_t n)
{
    if (s->len + n > s->cap) {
        size_t cap = s->cap != 0 ? s->cap : 4096;
        char *grown;

        while (cap < s->len + n)
            cap *= 2;
        if ((grown = realloc(s->buf, cap)) == NULL)
            return -1;
        s->buf = grown;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, data, n);
    s->len += n;
    return 0;
}

/* Only the nesting is followed here, enough to find where an object ends
 * (braces inside strings do not count); whether it is valid JSON is
 * jansson's to say when it parses the object. */
int
dsc_etcd_stream_feed(struct dsc_etcd_stream *s, const char *data, size_t n,
                     dsc_etcd_object_pt fn, void *arg, char *err, size_t errlen)
{
    size_t start = 0;                   /* of the bytes not yet copied */

    if (s->is_broken) {
        snprintf(err, errlen, "the stream broke earlier");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        char c = data[i];

        if (s->len == 0 && start == i) {        /* between objects */
            if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
                start = i + 1;
                continue;
            }
            if (c != '{') {
                snprintf(err, errlen, "byte 0x%02x between JSON objects", (unsigned char)c);
                s->is_broken = true;
                return -1;
            }
        }
        if (s->is_in_string) {
            if (s->is_escaped)
                s->is_escaped = false;
            else if (c == '\\')
                s->is_escaped = true;
            else if (c == '"')
                s->is_in_string = false;
        } else if (c == '"') {
            s->is_in_string = true;
        } else if (c == '{' || c == '[') {
            s->depth++;
        } else if ((c == '}' || c == ']') && --s->depth == 0) {
            const char *obj = data + start;
            size_t len = i + 1 - start;
            int rc;

            if (s->len + len > s->max) {
                snprintf(err, errlen, "a JSON object longer than %zu bytes", s->max);
                s->is_broken = true;
                return -1;
            }
            if (s->len > 0) {           /* begun in an earlier piece */
                if (dsc_etcd_stream_append(s, obj, len) != 0) {
                    snprintf(err, errlen, "out of memory");
                    s->is_broken = true;
                    return -1;
                }
                obj = s->buf;
                len = s->len;
            }
            s->len = 0;
            start = i + 1;
            rc = fn(arg, obj, len);
            if (rc != 0) {
                s->is_broken = true;
                err[0] = '\0';
                return -1;
            }
        }
    }
    if (start < n) {                    /* an object goes on in the next piece */
        if (s->len + (n - start) > s->max) {
            snprintf(err, errlen, "a JSON object longer than %zu bytes", s->max);
            s->is_broken = true;
            return -1;
        }
        if (dsc_etcd_stream_append(s, data + start, n - start) != 0) {
            snprintf(err, errlen, "out of memory");
            s->is_broken = true;
            return -1;
        }
    }
    return 0;
}

/* ---------------------------------------------------------- base64 */

static int
dsc_b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

/* Decodes standard base64 (padding optional) into a malloc'ed,
 * NUL-terminated buffer: 0, or -1 when s is not base64 or out of memory. */
static int
dsc_b64_decode(const char *s, char **out, size_t *out_len)
{
    size_t n = strlen(s), k = 0;
    uint32_t acc = 0;
    int bits = 0;
    char *buf;

    while (n > 0 && s[n - 1] == '=')
        n--;
    if ((buf = malloc(n * 3 / 4 + 1)) == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        int v = dsc_b64_value((unsigned char)s[i]);

        if (v < 0) {
            free(buf);
            return -1;
        }
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            buf[k++] = (char)(acc >> bits & 0xff);
        }
    }
    if (bits >= 6) {                    /* one lone character: not base64 */
        free(buf);
        return -1;
    }
    buf[k] = '\0';
    *out = buf;
    *out_len = k;
    return 0;
}

static char *
dsc_b64_encode(const unsigned char *s, size_t n)
{
    static const char digits[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = malloc((n + 2) / 3 * 4 + 1), *p = out;

    if (out == NULL)
        return NULL;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0) |
                     (i + 2 < n ? s[i + 2] : 0);

        *p++ = digits[v >> 18 & 63];
        *p++ = digits[v >> 12 & 63];
        *p++ = i + 1 < n ? digits[v >> 6 & 63] : '=';
        *p++ = i + 2 < n ? digits[v & 63] : '=';
    }
    *p = '\0';
    return out;
}

/* ---------------------------------------------------------- answers */

/* An int64 field, as the gateway writes it (a string) or as a number; 0
 * when absent. -1 when it is neither. */
static int
dsc_json_int64(const json_t *obj, const char *key, int64_t *out)
{
    const json_t *v = json_object_get(obj, key);

    *out = 0;
    if (v == NULL || json_is_null(v))
        return 0;
    if (json_is_integer(v)) {
        *out = json_integer_value(v);
        return 0;
    }
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        char *end;
        long long n;

        errno = 0;
        n = strtoll(s, &end, 10);
        if (*s == '\0' || *end != '\0' || errno != 0)
            return -1;
        *out = n;
        return 0;
    }
    return -1;
}

static json_t *
dsc_json_load(const char *json, size_t len, char *err, size_t errlen)
{
    json_error_t je;
    json_t *root = json_loadb(json, len, 0, &je);

    if (root == NULL) {
        snprintf(err, errlen, "not JSON: %s", je.text);
        return NULL;
    }
    if (!json_is_object(root)) {
        snprintf(err, errlen, "not a JSON object");
        json_decref(root);
        return NULL;
    }
    return root;
}

static void
dsc_etcd_kvs_free(struct dsc_etcd_kv *kvs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(kvs[i].key);
        free(kvs[i].value);
    }
    free(kvs);
}

/* One mvccpb.KeyValue object into kv: 0, or -1 with err set. */
static int
dsc_etcd_kv_read(const json_t *o, struct dsc_etcd_kv *kv, char *err, size_t errlen)
{
    const json_t *key = json_object_get(o, "key"), *value = json_object_get(o, "value");

    if (!json_is_object(o) || !json_is_string(key)) {
        snprintf(err, errlen, "a kv without its key");
        return -1;
    }
    if (value != NULL && !json_is_string(value)) {
        snprintf(err, errlen, "a kv value that is not a string");
        return -1;
    }
    if (dsc_json_int64(o, "mod_revision", &kv->mod_revision) != 0) {
        snprintf(err, errlen, "a kv whose mod_revision is not a number");
        return -1;
    }
    if (dsc_b64_decode(json_string_value(key), &kv->key, &kv->key_len) != 0) {
        snprintf(err, errlen, "a key that is not base64");
        return -1;
    }
    if (dsc_b64_decode(value != NULL ? json_string_value(value) : "", &kv->value,
                       &kv->value_len) != 0) {
        free(kv->key);
        kv->key = NULL;
        snprintf(err, errlen, "a value that is not base64");
        return -1;
    }
    return 0;
}

/* The message of {"error":"...", "message":"..."} (a unary answer) or
 * {"error":{"message":"..."}} (the stream's), or NULL. */
static const char *
dsc_etcd_error_message(const json_t *root)
{
    const json_t *e = json_object_get(root, "error");
    const json_t *m = json_object_get(root, "message");

    if (json_is_object(e))
        m = json_object_get(e, "message");
    if (json_is_string(m))
        return json_string_value(m);
    if (json_is_string(e))
        return json_string_value(e);
    return NULL;
}

int
dsc_etcd_watch_parse(const char *json, size_t len, struct dsc_etcd_watch_msg *out, char *err,
                     size_t errlen)
{
    json_t *root = dsc_json_load(json, len, err, errlen);
    const json_t *result, *events, *reason;
    const char *message;
    int rc = -1;

    memset(out, 0, sizeof(*out));
    if (root == NULL)
        return -1;
    result = json_object_get(root, "result");
    if (result == NULL) {
        if ((message = dsc_etcd_error_message(root)) == NULL) {
            snprintf(err, errlen, "neither a result nor an error");
            goto done;
        }
        out->is_error = true;
        snprintf(out->reason, sizeof(out->reason), "%s", message);
        rc = 0;
        goto done;
    }
    if (!json_is_object(result) ||
        dsc_json_int64(json_object_get(result, "header"), "revision", &out->revision) != 0 ||
        dsc_json_int64(result, "compact_revision", &out->compact_revision) != 0) {
        snprintf(err, errlen, "a result without a readable header or revision");
        goto done;
    }
    out->is_created = json_is_true(json_object_get(result, "created"));
    out->is_canceled = json_is_true(json_object_get(result, "canceled"));
    if (json_is_string(reason = json_object_get(result, "cancel_reason")))
        snprintf(out->reason, sizeof(out->reason), "%s", json_string_value(reason));
    events = json_object_get(result, "events");
    if (events != NULL && !json_is_array(events)) {
        snprintf(err, errlen, "events is not an array");
        goto done;
    }
    if (json_array_size(events) > 0 &&
        (out->events = calloc(json_array_size(events), sizeof(*out->events))) == NULL) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < json_array_size(events); i++) {
        const json_t *ev = json_array_get(events, i), *type = json_object_get(ev, "type");
        struct dsc_etcd_kv *kv = &out->events[out->nevents];

        /* PUT is the enum's zero value: the gateway leaves it out */
        if (type != NULL && !(json_is_string(type) && (strcmp(json_string_value(type), "PUT") == 0 ||
                                                       strcmp(json_string_value(type), "DELETE") == 0))) {
            snprintf(err, errlen, "an event of an unknown type");
            goto done;
        }
        if (dsc_etcd_kv_read(json_object_get(ev, "kv"), kv, err, errlen) != 0)
            goto done;
        kv->is_delete = type != NULL && strcmp(json_string_value(type), "DELETE") == 0;
        out->nevents++;
    }
    rc = 0;
done:
    if (rc != 0) {
        dsc_etcd_watch_fini(out);
    }
    json_decref(root);
    return rc;
}

void
dsc_etcd_watch_fini(struct dsc_etcd_watch_msg *m)
{
    dsc_etcd_kvs_free(m->events, m->nevents);
    m->events = NULL;
    m->nevents = 0;
}

int
dsc_etcd_range_parse(const char *json, size_t len, struct dsc_etcd_range *out, char *err,
                     size_t errlen)
{
    json_t *root = dsc_json_load(json, len, err, errlen);
    const json_t *kvs;
    int rc = -1;

    memset(out, 0, sizeof(*out));
    if (root == NULL)
        return -1;
    if (dsc_json_int64(json_object_get(root, "header"), "revision", &out->revision) != 0 ||
        out->revision <= 0) {
        const char *m = dsc_etcd_error_message(root);

        snprintf(err, errlen, "%s", m != NULL ? m : "an answer without a revision");
        goto done;
    }
    out->is_more = json_is_true(json_object_get(root, "more"));
    kvs = json_object_get(root, "kvs");
    if (kvs != NULL && !json_is_array(kvs)) {
        snprintf(err, errlen, "kvs is not an array");
        goto done;
    }
    if (json_array_size(kvs) > 0 &&
        (out->kvs = calloc(json_array_size(kvs), sizeof(*out->kvs))) == NULL) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < json_array_size(kvs); i++) {
        if (dsc_etcd_kv_read(json_array_get(kvs, i), &out->kvs[out->nkvs], err, errlen) != 0)
            goto done;
        out->nkvs++;
    }
    rc = 0;
done:
    if (rc != 0)
        dsc_etcd_range_fini(out);
    json_decref(root);
    return rc;
}

void
dsc_etcd_range_fini(struct dsc_etcd_range *r)
{
    dsc_etcd_kvs_free(r->kvs, r->nkvs);
    r->kvs = NULL;
    r->nkvs = 0;
}

int
dsc_etcd_token_parse(const char *json, size_t len, char *token, size_t cap, char *err,
                     size_t errlen)
{
    json_t *root = dsc_json_load(json, len, err, errlen);
    const json_t *t;
    int rc = -1;

    if (root == NULL)
        return -1;
    t = json_object_get(root, "token");
    if (!json_is_string(t) || json_string_length(t) == 0 || json_string_length(t) >= cap) {
        const char *m = dsc_etcd_error_message(root);

        snprintf(err, errlen, "%s", m != NULL ? m : "no token in the answer");
    } else {
        snprintf(token, cap, "%s", json_string_value(t));
        rc = 0;
    }
    json_decref(root);
    return rc;
}

void
dsc_etcd_error_text(const char *json, size_t len, char *out, size_t cap)
{
    json_error_t je;
    json_t *root = json_loadb(json, len, 0, &je);
    const char *m = json_is_object(root) ? dsc_etcd_error_message(root) : NULL;

    if (m != NULL) {
        snprintf(out, cap, "%s", m);
    } else {
        size_t n = len < cap - 1 ? len : cap - 1;

        /* the body's start, one line of printable bytes */
        for (size_t i = 0; i < n; i++)
            out[i] = json[i] >= 0x20 && json[i] < 0x7f ? json[i] : ' ';
        out[n] = '\0';
    }
    json_decref(root);
}

/* ---------------------------------------------------------- requests */

static char *
dsc_json_dump(json_t *o)
{
    char *s = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;

    json_decref(o);
    return s;
}

/* key and range_end in base64 into o: every key that starts with prefix.
 * The last byte below 0xff goes up by one (the bytes after it dropped);
 * a prefix of only 0xff bytes (or none) has no end: "\0", all keys. */
static int
dsc_etcd_set_range(json_t *o, const char *prefix)
{
    size_t n = strlen(prefix);
    unsigned char *end = malloc(n + 1);
    char *k = dsc_b64_encode((const unsigned char *)prefix, n), *e;
    size_t m = n;
    int rc;

    if (end == NULL || k == NULL) {
        free(end);
        free(k);
        return -1;
    }
    memcpy(end, prefix, n);
    while (m > 0 && end[m - 1] == 0xff)
        m--;
    if (m > 0)
        end[m - 1]++;
    else
        end[m++] = 0;
    e = dsc_b64_encode(end, m);
    rc = e != NULL && json_object_set_new(o, "key", json_string(k)) == 0 &&
                 json_object_set_new(o, "range_end", json_string(e)) == 0
             ? 0
             : -1;
    free(end);
    free(k);
    free(e);
    return rc;
}

char *
dsc_etcd_range_body(const char *prefix)
{
    json_t *o = json_object();

    if (o == NULL || dsc_etcd_set_range(o, prefix) != 0) {
        json_decref(o);
        return NULL;
    }
    return dsc_json_dump(o);
}

char *
dsc_etcd_watch_body(const char *prefix, int64_t start_revision)
{
    json_t *req = json_object(), *o = json_object();
    char rev[24];

    snprintf(rev, sizeof(rev), "%" PRId64, start_revision);
    if (req == NULL || o == NULL || dsc_etcd_set_range(req, prefix) != 0 ||
        (start_revision > 0 && json_object_set_new(req, "start_revision", json_string(rev)) != 0) ||
        json_object_set_new(o, "create_request", req) != 0) {
        json_decref(o);
        return NULL;
    }
    return dsc_json_dump(o);
}

char *
dsc_etcd_auth_body(const char *user, const char *password)
{
    return dsc_json_dump(json_pack("{s:s, s:s}", "name", user, "password", password));
}

/* ---------------------------------------------------------- values */

/* "ADDRESS:PORT" with an IP literal address into out (as written): 0, or
 * -1 with why. */
static int
dsc_etcd_address_parse(const char *s, size_t n, char *out, size_t cap, char *err, size_t errlen)
{
    char host[64];
    const char *colon;
    size_t hlen;
    unsigned long port = 0;
    unsigned char bin[16];
    bool is_v6 = n > 0 && s[0] == '[';

    if (n == 0) {
        snprintf(err, errlen, "an empty address");
        return -1;
    }
    if (n >= cap) {
        snprintf(err, errlen, "an address of %zu bytes", n);
        return -1;
    }
    if (is_v6) {
        const char *close = memchr(s, ']', n);

        if (close == NULL || close + 1 == s + n || close[1] != ':') {
            snprintf(err, errlen, "not [IPv6]:PORT");
            return -1;
        }
        colon = close + 1;
        hlen = (size_t)(close - s - 1);
        if (hlen >= sizeof(host)) {
            snprintf(err, errlen, "not an IP address");
            return -1;
        }
        memcpy(host, s + 1, hlen);
    } else {
        colon = memrchr(s, ':', n);
        if (colon == NULL) {
            snprintf(err, errlen, "no :PORT");
            return -1;
        }
        hlen = (size_t)(colon - s);
        if (hlen >= sizeof(host)) {
            snprintf(err, errlen, "not an IP address");
            return -1;
        }
        memcpy(host, s, hlen);
    }
    host[hlen] = '\0';
    if (inet_pton(is_v6 ? AF_INET6 : AF_INET, host, bin) != 1) {
        snprintf(err, errlen, "\"%s\" is not an IP%s address (a host name is not resolved)",
                 host, is_v6 ? "v6" : "v4");
        return -1;
    }
    for (const char *p = colon + 1; p < s + n; p++) {
        if (*p < '0' || *p > '9' || port > 65535) {
            port = 0;
            break;
        }
        port = port * 10 + (unsigned long)(*p - '0');
    }
    if (port == 0 || port > 65535) {
        snprintf(err, errlen, "the port is not 1 to 65535");
        return -1;
    }
    memcpy(out, s, n);
    out[n] = '\0';
    return 0;
}

int
dsc_etcd_server_parse(const struct dsc_etcd_kv *kv, struct dsc_server *out, char *err,
                      size_t errlen)
{
    const char *slash = memrchr(kv->key, '/', kv->key_len);
    const char *name = slash != NULL ? slash + 1 : kv->key;
    size_t nlen = kv->key_len - (size_t)(name - kv->key);
    const char *v = kv->value;
    size_t vlen = kv->value_len;

    memset(out, 0, sizeof(*out));
    out->weight = 1;
    if (nlen == 0 || nlen > DSC_SERVER_NAME_MAX || memchr(name, '\0', nlen) != NULL) {
        snprintf(err, errlen, "the key's last segment is not a server name (1 to %d characters)",
                 DSC_SERVER_NAME_MAX);
        return -1;
    }
    memcpy(out->name, name, nlen);
    out->name[nlen] = '\0';
    if (!conf_server_name_is_valid(out->name)) {
        snprintf(err, errlen, "\"%s\" is not a server name (A-Z a-z 0-9 _ . - : @ [ ])",
                 out->name);
        return -1;
    }
    while (vlen > 0 && (v[vlen - 1] == ' ' || v[vlen - 1] == '\n' || v[vlen - 1] == '\r' ||
                        v[vlen - 1] == '\t'))
        vlen--;
    while (vlen > 0 && (*v == ' ' || *v == '\n' || *v == '\r' || *v == '\t')) {
        v++;
        vlen--;
    }
    if (vlen > 0 && *v == '{') {
        json_error_t je;
        json_t *o = json_loadb(v, vlen, 0, &je), *addr, *weight;
        int rc = -1;

        if (!json_is_object(o)) {
            snprintf(err, errlen, "not a JSON object: %s", o == NULL ? je.text : "");
        } else if (!json_is_string(addr = json_object_get(o, "address"))) {
            snprintf(err, errlen, "no \"address\" string");
        } else if ((weight = json_object_get(o, "weight")) != NULL &&
                   (!json_is_integer(weight) || json_integer_value(weight) < 1 ||
                    json_integer_value(weight) > UINT32_MAX)) {
            snprintf(err, errlen, "\"weight\" is not a whole number from 1");
        } else {
            rc = dsc_etcd_address_parse(json_string_value(addr), json_string_length(addr),
                                        out->address, sizeof(out->address), err, errlen);
            if (weight != NULL)
                out->weight = (uint32_t)json_integer_value(weight);
        }
        json_decref(o);
        return rc;
    }
    if (memchr(v, '\0', vlen) != NULL) {
        snprintf(err, errlen, "a NUL in the value");
        return -1;
    }
    return dsc_etcd_address_parse(v, vlen, out->address, sizeof(out->address), err, errlen);
}
