/*
 * wazoo_guest.c: the guest side of wazoo for C recipes (see wazoo_guest.h).
 *
 * Ownership, as wit-bindgen's C bindings define it: strings and lists passed to an import are
 * borrowed by it; what an import returns belongs to the caller (released here with the
 * matching *_free, or handed on to the caller as C strings); an empty string or list returned
 * holds no allocation (its pointer is not one malloc gave).
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, nanosleep under -std=c11 */

#include "wazoo_guest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- Errors ------------------------------------------------------------------------------ */

static char *last_message;
/* The failure last_message belongs to: a code with no message of its own never shows another's. */
static int last_code;

static const char *const NAMES[] = {
    "ok",
    "no-node",
    "node-exists",
    "not-empty",
    "bad-version",
    "no-children-for-ephemerals",
    "connection-loss",
    "session-expired",
    "no-auth",
    "invalid-path",
    "invalid-argument",
    "timeout",
    "quota-exceeded",
    "limit-exceeded",
    "unimplemented",
    "other",
};

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p)
        abort();
    return p;
}

static char *copy_n(const void *s, size_t n) {
    char *p = xmalloc(n + 1);
    if (n)
        memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

static void set_message(char *owned) {
    free(last_message);
    last_message = owned;
}

static void set_failure(int code, char *owned) {
    set_message(owned);
    last_code = code;
}

const char *wz_message(void) {
    return last_message ? last_message : "";
}

const char *wz_error_name(int code) {
    if (code < 0 || code > WZ_OTHER)
        return "unknown";
    return NAMES[code];
}

int wz_fail(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *text = xmalloc(n > 0 ? (size_t)n + 1 : 1);
    va_start(ap, fmt);
    vsnprintf(text, n > 0 ? (size_t)n + 1 : 1, fmt, ap);
    va_end(ap);
    set_failure(code, text);
    return code;
}

bool wz_to_zk_error(int code, wazoo_zk_types_zk_error_t *err) {
    if (code == WZ_OK)
        return true;
    if (code < WZ_NO_NODE || code > WZ_OTHER) {
        char *why = wz_format("error code %d is no zk-error", code);
        err->tag = WAZOO_ZK_TYPES_ZK_ERROR_OTHER;
        recipe_string_dup(&err->val.other, why);
        free(why);
        return false;
    }
    err->tag = (uint8_t)(code - 1);
    /* The text of the failure that set this code, or else the code's name: never another's. */
    const char *text = code == last_code && last_message ? last_message : wz_error_name(code);
    switch (err->tag) {
    case WAZOO_ZK_TYPES_ZK_ERROR_INVALID_PATH:
        recipe_string_dup(&err->val.invalid_path, text);
        break;
    case WAZOO_ZK_TYPES_ZK_ERROR_INVALID_ARGUMENT:
        recipe_string_dup(&err->val.invalid_argument, text);
        break;
    case WAZOO_ZK_TYPES_ZK_ERROR_LIMIT_EXCEEDED:
        recipe_string_dup(&err->val.limit_exceeded, text);
        break;
    case WAZOO_ZK_TYPES_ZK_ERROR_OTHER:
        recipe_string_dup(&err->val.other, text);
        break;
    default:
        break;
    }
    return false;
}

/* Takes an import's error: keeps its text, releases it, and returns its code. */
static int from_zk(wazoo_zk_types_zk_error_t *err) {
    int code = err->tag + 1;
    const recipe_string_t *text = NULL;
    switch (err->tag) {
    case WAZOO_ZK_TYPES_ZK_ERROR_INVALID_PATH:
        text = &err->val.invalid_path;
        break;
    case WAZOO_ZK_TYPES_ZK_ERROR_INVALID_ARGUMENT:
        text = &err->val.invalid_argument;
        break;
    case WAZOO_ZK_TYPES_ZK_ERROR_LIMIT_EXCEEDED:
        text = &err->val.limit_exceeded;
        break;
    case WAZOO_ZK_TYPES_ZK_ERROR_OTHER:
        text = &err->val.other;
        break;
    default:
        break;
    }
    set_failure(code, text ? copy_n(text->ptr, text->len) : NULL);
    wazoo_zk_types_zk_error_free(err);
    return code;
}

/* The message (and its code) as they stood before a step whose failure the caller forgives. */
typedef struct kept_message {
    char *text;
    int code;
} kept_message;

static kept_message keep_message(void) {
    kept_message kept = {last_message, last_code};
    last_message = NULL;
    return kept;
}

/* Puts the kept message back after a forgiven failure (rc 0), or drops it (the failure stands). */
static int restore_message(kept_message kept, int rc) {
    if (rc == WZ_OK)
        set_failure(kept.code, kept.text);
    else
        free(kept.text);
    return rc;
}

/* ---- Memory and strings ------------------------------------------------------------------ */

void wz_free(void *p) {
    free(p);
}

void wz_names_free(wz_names *names) {
    for (size_t i = 0; i < names->count; i++)
        free(names->names[i]);
    free(names->names);
    names->names = NULL;
    names->count = 0;
}

ptrdiff_t wz_names_find(const wz_names *names, const char *name) {
    for (size_t i = 0; i < names->count; i++)
        if (strcmp(names->names[i], name) == 0)
            return (ptrdiff_t)i;
    return -1;
}

char *wz_strdup(const char *s) {
    return copy_n(s, strlen(s));
}

char *wz_format(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *text = xmalloc(n > 0 ? (size_t)n + 1 : 1);
    va_start(ap, fmt);
    vsnprintf(text, n > 0 ? (size_t)n + 1 : 1, fmt, ap);
    va_end(ap);
    return text;
}

/* A C string from a string an import returned, which is released. */
static char *take(recipe_string_t *s) {
    char *p = copy_n(s->ptr, s->len);
    recipe_string_free(s);
    return p;
}

/* Takes a list of strings an import returned. */
static void take_names(recipe_list_string_t *list, wz_names *out) {
    out->count = list->len;
    out->names = xmalloc(list->len * sizeof(char *));
    for (size_t i = 0; i < list->len; i++)
        out->names[i] = copy_n(list->ptr[i].ptr, list->ptr[i].len);
    recipe_list_string_free(list);
}

int wz_take_string(recipe_string_t *s, char **out) {
    *out = NULL;
    if (s->len && memchr(s->ptr, '\0', s->len)) {
        recipe_string_free(s);
        return wz_fail(WZ_INVALID_ARGUMENT, "a string argument contains a NUL byte");
    }
    *out = take(s);
    return WZ_OK;
}

int wz_take_path(recipe_string_t *s, char **out) {
    *out = NULL;
    wazoo_zk_types_zk_error_t err;
    if (!wazoo_zk_znode_check_path(s, &err)) {
        recipe_string_free(s);
        return from_zk(&err);
    }
    return wz_take_string(s, out);
}

int wz_take_strings(recipe_list_string_t *list, wz_names *out) {
    out->names = NULL;
    out->count = 0;
    for (size_t i = 0; i < list->len; i++) {
        if (list->ptr[i].len && memchr(list->ptr[i].ptr, '\0', list->ptr[i].len)) {
            recipe_list_string_free(list);
            return wz_fail(WZ_INVALID_ARGUMENT, "argument %zu contains a NUL byte", i + 1);
        }
    }
    take_names(list, out);
    return WZ_OK;
}

/* The length of the valid UTF-8 sequence at s[0..n), or of its longest valid start (0 for a
 * byte no sequence starts with): the "maximal subpart" a single U+FFFD replaces. */
static size_t utf8_at(const uint8_t *s, size_t n, bool *valid) {
    uint8_t b = s[0];
    size_t need;
    uint8_t lo = 0x80, hi = 0xBF;
    *valid = false;
    if (b < 0x80) {
        *valid = true;
        return 1;
    } else if (b >= 0xC2 && b <= 0xDF) {
        need = 1;
    } else if (b >= 0xE0 && b <= 0xEF) {
        need = 2;
        if (b == 0xE0)
            lo = 0xA0;
        if (b == 0xED)
            hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        need = 3;
        if (b == 0xF0)
            lo = 0x90;
        if (b == 0xF4)
            hi = 0x8F;
    } else {
        return 1;
    }
    for (size_t k = 1; k <= need; k++) {
        if (k >= n || s[k] < (k == 1 ? lo : 0x80) || s[k] > (k == 1 ? hi : 0xBF))
            return k;
    }
    *valid = true;
    return need + 1;
}

char *wz_utf8_lossy(const void *data, size_t len, size_t *out_len) {
    const uint8_t *s = data;
    /* At worst every byte becomes the 3 bytes of U+FFFD. */
    char *out = xmalloc(len * 3 + 1);
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        bool valid;
        size_t k = utf8_at(s + i, len - i, &valid);
        if (valid) {
            memcpy(out + o, s + i, k);
            o += k;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
        }
        i += k;
    }
    out[o] = '\0';
    if (out_len)
        *out_len = o;
    return out;
}

char *wz_join(const char *dir, const char *name) {
    if (strcmp(dir, "/") == 0)
        return wz_format("/%s", name);
    return wz_format("%s/%s", dir, name);
}

const char *wz_node_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* ---- Nodes ------------------------------------------------------------------------------- */

/* A borrowed view of a C string, for an import. */
static recipe_string_t str(const char *s) {
    recipe_string_t v;
    recipe_string_set(&v, s);
    return v;
}

static recipe_list_u8_t bytes(const void *data, size_t len) {
    return (recipe_list_u8_t){(uint8_t *)data, len};
}

static wazoo_zk_types_create_mode_t create_mode(int mode, uint64_t ttl_ms) {
    wazoo_zk_types_create_mode_t m;
    m.tag = (uint8_t)mode;
    if (ttl_ms > 0 && mode == WZ_PERSISTENT) {
        m.tag = WAZOO_ZK_TYPES_CREATE_MODE_PERSISTENT_TTL;
        m.val.persistent_ttl = ttl_ms;
    } else if (ttl_ms > 0 && mode == WZ_PERSISTENT_SEQUENTIAL) {
        m.tag = WAZOO_ZK_TYPES_CREATE_MODE_PERSISTENT_SEQUENTIAL_TTL;
        m.val.persistent_sequential_ttl = ttl_ms;
    }
    return m;
}

static bool valid_mode(int mode) {
    return mode >= WZ_PERSISTENT && mode <= WZ_CONTAINER;
}

int wz_check_path(const char *path) {
    recipe_string_t p = str(path);
    wazoo_zk_types_zk_error_t err;
    if (!wazoo_zk_znode_check_path(&p, &err))
        return from_zk(&err);
    return WZ_OK;
}

static int create(const char *path, const void *data, size_t len, int mode, uint64_t ttl_ms,
                  char **created) {
    if (created)
        *created = NULL;
    if (!valid_mode(mode))
        return wz_fail(WZ_INVALID_ARGUMENT, "create mode %d is none of WZ_PERSISTENT…WZ_CONTAINER", mode);
    recipe_string_t p = str(path);
    recipe_list_u8_t d = bytes(data, len);
    wazoo_zk_types_create_mode_t m = create_mode(mode, ttl_ms);
    wazoo_zk_types_created_t ok;
    wazoo_zk_types_zk_error_t err;
    if (!wazoo_zk_znode_create(&p, &d, &m, &ok, &err))
        return from_zk(&err);
    if (created)
        *created = take(&ok.path);
    else
        recipe_string_free(&ok.path);
    return WZ_OK;
}

int wz_create(const char *path, const void *data, size_t len, int mode, char **created) {
    return create(path, data, len, mode, 0, created);
}

int wz_create_ttl(const char *path, const void *data, size_t len, bool sequential, uint64_t ttl_ms,
                  char **created) {
    if (ttl_ms == 0)
        return wz_fail(WZ_INVALID_ARGUMENT, "a TTL node needs a TTL above 0 ms");
    return create(path, data, len, sequential ? WZ_PERSISTENT_SEQUENTIAL : WZ_PERSISTENT, ttl_ms,
                  created);
}

/* Creates each missing ancestor of `path` in `mode`, through connection loss. */
static int create_ancestors(const char *path, int mode) {
    int checked = wz_check_path(path);
    if (checked != WZ_OK)
        return checked;
    kept_message kept = keep_message();
    char *ancestor = wz_strdup(path);
    int rc = WZ_OK;
    for (char *slash = strchr(ancestor + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        WZ_RETRYING(rc, wz_create(ancestor, NULL, 0, mode, NULL));
        *slash = '/';
        if (rc == WZ_NODE_EXISTS)
            rc = WZ_OK;
        if (rc != WZ_OK)
            break;
    }
    free(ancestor);
    return restore_message(kept, rc);
}

int wz_create_parents(const char *path) {
    return create_ancestors(path, WZ_PERSISTENT);
}

int wz_ensure_parents(const char *path) {
    return create_ancestors(path, WZ_CONTAINER);
}

int wz_create_protected(const char *dir, const char *name, const void *data, size_t len, int mode,
                        char **created, int64_t *czxid) {
    if (created)
        *created = NULL;
    if (!valid_mode(mode))
        return wz_fail(WZ_INVALID_ARGUMENT, "create mode %d is none of WZ_PERSISTENT…WZ_CONTAINER", mode);
    recipe_string_t d = str(dir), n = str(name);
    recipe_list_u8_t b = bytes(data, len);
    wazoo_zk_types_create_mode_t m = create_mode(mode, 0);
    wazoo_zk_types_created_t ok;
    wazoo_zk_types_zk_error_t err;
    if (!wazoo_zk_znode_create_protected(&d, &n, &b, &m, &ok, &err))
        return from_zk(&err);
    if (czxid)
        *czxid = ok.stat.czxid;
    if (created)
        *created = take(&ok.path);
    else
        recipe_string_free(&ok.path);
    return WZ_OK;
}

int wz_find_protected(const char *dir, const char *prefix, bool ephemeral, char **found) {
    *found = NULL;
    kept_message kept = keep_message();
    int rc = wz_sync(dir);
    if (rc == WZ_NO_NODE)
        return restore_message(kept, WZ_OK);
    if (rc != WZ_OK)
        return restore_message(kept, rc);
    wz_names children;
    rc = wz_get_children(dir, &children);
    if (rc == WZ_NO_NODE)
        return restore_message(kept, WZ_OK);
    if (rc != WZ_OK)
        return restore_message(kept, rc);
    int64_t me = ephemeral ? wz_session_id() : 0;
    size_t plen = strlen(prefix);
    for (size_t i = 0; i < children.count && rc == WZ_OK && !*found; i++) {
        if (strncmp(children.names[i], prefix, plen) != 0)
            continue;
        char *path = wz_join(dir, children.names[i]);
        int there = 0;
        wz_stat stat;
        rc = wz_exists(path, &there, &stat);
        if (rc == WZ_OK && there && (!ephemeral || stat.ephemeral_owner == me))
            *found = path;
        else
            free(path);
    }
    wz_names_free(&children);
    return restore_message(kept, rc);
}

int wz_delete(const char *path, int32_t version) {
    recipe_string_t p = str(path);
    wazoo_zk_types_zk_error_t err;
    if (!wazoo_zk_znode_delete(&p, version == WZ_ANY_VERSION ? NULL : &version, &err))
        return from_zk(&err);
    return WZ_OK;
}

int wz_delete_retrying(const char *path) {
    kept_message kept = keep_message();
    int rc;
    WZ_RETRYING(rc, wz_delete(path, WZ_ANY_VERSION));
    if (rc == WZ_NO_NODE || rc == WZ_SESSION_EXPIRED)
        rc = WZ_OK;
    return restore_message(kept, rc);
}

int wz_delete_unwaited(const char *path) {
    recipe_string_t p = str(path);
    wazoo_zk_types_zk_error_t err;
    if (!wazoo_zk_znode_delete_unwaited(&p, &err))
        return from_zk(&err);
    return WZ_OK;
}

int wz_release_node(const char *path) {
    kept_message kept = keep_message();
    int rc;
    WZ_RETRYING(rc, wz_delete_unwaited(path));
    if (rc == WZ_NO_NODE || rc == WZ_SESSION_EXPIRED)
        rc = WZ_OK;
    return restore_message(kept, rc);
}

int wz_exists(const char *path, int *exists, wz_stat *stat) {
    recipe_string_t p = str(path);
    wazoo_zk_znode_option_stat_t ok;
    wazoo_zk_types_zk_error_t err;
    if (exists)
        *exists = 0;
    if (!wazoo_zk_znode_exists(&p, &ok, &err))
        return from_zk(&err);
    if (exists)
        *exists = ok.is_some;
    if (stat && ok.is_some)
        *stat = ok.val;
    return WZ_OK;
}

/* Hands a byte list an import returned to the caller, NUL-terminated, or releases it. */
static void take_bytes(recipe_list_u8_t *list, uint8_t **data, size_t *len) {
    if (len)
        *len = list->len;
    if (data) {
        uint8_t *p;
        if (list->len) {
            p = realloc(list->ptr, list->len + 1);
            if (!p)
                abort();
        } else {
            p = xmalloc(1);
        }
        p[list->len] = '\0';
        *data = p;
    } else {
        recipe_list_u8_free(list);
    }
}

int wz_get_data(const char *path, uint8_t **data, size_t *len, wz_stat *stat) {
    if (data)
        *data = NULL;
    recipe_string_t p = str(path);
    wazoo_zk_znode_tuple2_list_u8_stat_t ok;
    wazoo_zk_types_zk_error_t err;
    if (!wazoo_zk_znode_get_data(&p, &ok, &err))
        return from_zk(&err);
    if (stat)
        *stat = ok.f1;
    take_bytes(&ok.f0, data, len);
    return WZ_OK;
}

int wz_set_data(const char *path, const void *data, size_t len, int32_t version, wz_stat *stat) {
    recipe_string_t p = str(path);
    recipe_list_u8_t d = bytes(data, len);
    wz_stat ok;
    wazoo_zk_types_zk_error_t err;
    if (!wazoo_zk_znode_set_data(&p, &d, version == WZ_ANY_VERSION ? NULL : &version, &ok, &err))
        return from_zk(&err);
    if (stat)
        *stat = ok;
    return WZ_OK;
}

int wz_get_children(const char *path, wz_names *out) {
    out->names = NULL;
    out->count = 0;
    recipe_string_t p = str(path);
    wazoo_zk_znode_tuple2_list_string_stat_t ok;
    wazoo_zk_types_zk_error_t err;
    if (!wazoo_zk_znode_get_children(&p, &ok, &err))
        return from_zk(&err);
    take_names(&ok.f0, out);
    return WZ_OK;
}

int wz_sync(const char *path) {
    recipe_string_t p = str(path);
    wazoo_zk_types_zk_error_t err;
    if (!wazoo_zk_znode_sync(&p, &err))
        return from_zk(&err);
    return WZ_OK;
}

int wz_owns(const char *path, const void *data, size_t len, bool *owns) {
    recipe_string_t p = str(path);
    recipe_list_u8_t d = bytes(data, len);
    wazoo_zk_types_zk_error_t err;
    *owns = false;
    if (!wazoo_zk_session_owns(&p, data ? &d : NULL, owns, &err))
        return from_zk(&err);
    return WZ_OK;
}

/* ---- Ordering ---------------------------------------------------------------------------- */

/* How the comparison below finds a name's key: the last 10 characters (the sequence), or the
 * part after the last `sort_marker` (the whole name without one). qsort takes no context. */
static bool sort_by_suffix;
static const char *sort_marker;

static const char *sort_key(const char *name) {
    if (sort_by_suffix) {
        size_t n = strlen(name);
        return n > 10 ? name + n - 10 : name;
    }
    const char *at = NULL;
    if (sort_marker && *sort_marker)
        for (const char *p = strstr(name, sort_marker); p; p = strstr(p + 1, sort_marker))
            at = p;
    return at ? at + strlen(sort_marker) : name;
}

static int by_key(const void *a, const void *b) {
    const char *x = *(const char *const *)a, *y = *(const char *const *)b;
    int c = strcmp(sort_key(x), sort_key(y));
    return c ? c : strcmp(x, y);
}

void wz_sort_by_sequence(wz_names *names) {
    sort_by_suffix = true;
    if (names->count > 1)
        qsort(names->names, names->count, sizeof(char *), by_key);
}

void wz_sort_by_marker(wz_names *names, const char *marker) {
    sort_by_suffix = false;
    sort_marker = marker;
    if (names->count > 1)
        qsort(names->names, names->count, sizeof(char *), by_key);
    sort_marker = NULL;
}

/* ---- Atomic multi ------------------------------------------------------------------------ */

wz_op wz_op_create(const char *path, const void *data, size_t len, int mode) {
    return (wz_op){.kind = WZ_OP_CREATE, .path = path, .data = data, .len = len, .mode = mode,
                   .version = WZ_ANY_VERSION};
}

wz_op wz_op_delete(const char *path, int32_t version) {
    return (wz_op){.kind = WZ_OP_DELETE, .path = path, .version = version};
}

wz_op wz_op_set_data(const char *path, const void *data, size_t len, int32_t version) {
    return (wz_op){.kind = WZ_OP_SET_DATA, .path = path, .data = data, .len = len, .version = version};
}

wz_op wz_op_check(const char *path, int32_t version) {
    return (wz_op){.kind = WZ_OP_CHECK, .path = path, .version = version};
}

static recipe_option_s32_t version_of(int32_t version) {
    return (recipe_option_s32_t){version != WZ_ANY_VERSION, version == WZ_ANY_VERSION ? 0 : version};
}

int wz_multi(const wz_op *ops, size_t n, wz_op_result *results, int *failed) {
    if (failed)
        *failed = -1;
    for (size_t i = 0; results && i < n; i++)
        results[i] = (wz_op_result){.kind = -1};
    wazoo_zk_types_op_t *wire = xmalloc(n * sizeof *wire);
    for (size_t i = 0; i < n; i++) {
        const wz_op *op = &ops[i];
        wazoo_zk_types_op_t *w = &wire[i];
        w->tag = (uint8_t)op->kind;
        switch (op->kind) {
        case WZ_OP_CREATE:
            if (!valid_mode(op->mode)) {
                free(wire);
                if (failed)
                    *failed = (int)i;
                return wz_fail(WZ_INVALID_ARGUMENT, "op %zu: create mode %d is none of WZ_PERSISTENT…WZ_CONTAINER",
                               i, op->mode);
            }
            w->val.create = (wazoo_zk_types_create_op_t){str(op->path), bytes(op->data, op->len),
                                                         create_mode(op->mode, op->ttl_ms)};
            break;
        case WZ_OP_DELETE:
            w->val.delete_ = (wazoo_zk_types_delete_op_t){str(op->path), version_of(op->version)};
            break;
        case WZ_OP_SET_DATA:
            w->val.set_data = (wazoo_zk_types_set_data_op_t){str(op->path), bytes(op->data, op->len),
                                                             version_of(op->version)};
            break;
        case WZ_OP_CHECK:
            w->val.check = (wazoo_zk_types_check_op_t){str(op->path), op->version};
            break;
        default:
            free(wire);
            if (failed)
                *failed = (int)i;
            return wz_fail(WZ_INVALID_ARGUMENT, "op %zu: kind %d is none of WZ_OP_CREATE…WZ_OP_CHECK", i,
                           op->kind);
        }
    }
    wazoo_zk_znode_list_op_t list = {wire, n};
    wazoo_zk_znode_list_op_result_t ok;
    wazoo_zk_types_multi_error_t err;
    bool applied = wazoo_zk_znode_multi(&list, &ok, &err);
    free(wire);
    if (!applied) {
        if (failed)
            *failed = err.index.is_some ? (int)err.index.val : -1;
        return from_zk(&err.error);
    }
    for (size_t i = 0; results && i < n && i < ok.len; i++) {
        wazoo_zk_types_op_result_t *r = &ok.ptr[i];
        results[i].kind = r->tag;
        if (r->tag == WAZOO_ZK_TYPES_OP_RESULT_CREATED) {
            results[i].path = copy_n(r->val.created.path.ptr, r->val.created.path.len);
            results[i].stat = r->val.created.stat;
        } else if (r->tag == WAZOO_ZK_TYPES_OP_RESULT_DATA_SET) {
            results[i].stat = r->val.data_set;
        }
    }
    wazoo_zk_znode_list_op_result_free(&ok);
    return WZ_OK;
}

void wz_op_results_free(wz_op_result *results, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(results[i].path);
        results[i].path = NULL;
    }
}

/* ---- Session ----------------------------------------------------------------------------- */

int wz_unique_id(char **out) {
    recipe_string_t id;
    wazoo_zk_session_unique_id(&id);
    *out = take(&id);
    return WZ_OK;
}

int64_t wz_session_id(void) {
    static bool known;
    static int64_t id;
    if (!known) {
        wazoo_zk_session_session_info_t info;
        wazoo_zk_session_info(&info);
        id = info.id;
        known = true;
    }
    return id;
}

/* ---- Deadlines and retries --------------------------------------------------------------- */

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

wz_deadline wz_deadline_after(const uint64_t *maybe_timeout_ms) {
    if (!maybe_timeout_ms)
        return wz_deadline_never();
    uint64_t now = now_ns();
    /* A deadline past what the clock can hold is no deadline. */
    if (*maybe_timeout_ms > (UINT64_MAX - now) / 1000000u)
        return wz_deadline_never();
    return (wz_deadline){false, now + *maybe_timeout_ms * 1000000u};
}

wz_deadline wz_deadline_never(void) {
    return (wz_deadline){true, 0};
}

int wz_deadline_left(wz_deadline deadline, uint64_t *left_ms, bool *unlimited) {
    if (unlimited)
        *unlimited = deadline.unlimited;
    if (left_ms)
        *left_ms = 0;
    if (deadline.unlimited)
        return WZ_OK;
    uint64_t now = now_ns();
    uint64_t left = now < deadline.at_ns ? (deadline.at_ns - now) / 1000000u : 0;
    if (left_ms)
        *left_ms = left;
    return left ? WZ_OK : WZ_TIMEOUT;
}

/* The milliseconds left for a host call's timeout: NULL for none, else `buf` (maybe 0). */
static uint64_t *timeout_of(wz_deadline deadline, uint64_t *buf) {
    bool unlimited;
    wz_deadline_left(deadline, buf, &unlimited);
    return unlimited ? NULL : buf;
}

void wz_backoff(unsigned attempt) {
    unsigned ms = 50 * (attempt < 10 ? attempt : 10);
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- Watches and waiting ----------------------------------------------------------------- */

static void keep_watcher(wazoo_zk_watch_own_watcher_t own, wz_watcher *watcher) {
    if (watcher)
        watcher->handle = own.__handle;
    else
        wazoo_zk_watch_watcher_drop_own(own);
}

int wz_exists_watch(const char *path, int *exists, wz_stat *stat, wz_watcher *watcher) {
    if (watcher)
        watcher->handle = 0;
    if (exists)
        *exists = 0;
    recipe_string_t p = str(path);
    wazoo_zk_watch_tuple2_option_stat_own_watcher_t ok;
    wazoo_zk_types_zk_error_t err;
    if (!wazoo_zk_watch_exists_watch(&p, &ok, &err))
        return from_zk(&err);
    if (exists)
        *exists = ok.f0.is_some;
    if (stat && ok.f0.is_some)
        *stat = ok.f0.val;
    keep_watcher(ok.f1, watcher);
    return WZ_OK;
}

int wz_get_data_watch(const char *path, uint8_t **data, size_t *len, wz_stat *stat,
                      wz_watcher *watcher) {
    if (watcher)
        watcher->handle = 0;
    if (data)
        *data = NULL;
    recipe_string_t p = str(path);
    wazoo_zk_watch_tuple3_list_u8_stat_own_watcher_t ok;
    wazoo_zk_types_zk_error_t err;
    if (!wazoo_zk_watch_get_data_watch(&p, &ok, &err))
        return from_zk(&err);
    if (stat)
        *stat = ok.f1;
    take_bytes(&ok.f0, data, len);
    keep_watcher(ok.f2, watcher);
    return WZ_OK;
}

int wz_get_children_watch(const char *path, wz_names *out, wz_watcher *watcher) {
    if (watcher)
        watcher->handle = 0;
    out->names = NULL;
    out->count = 0;
    recipe_string_t p = str(path);
    wazoo_zk_watch_tuple3_list_string_stat_own_watcher_t ok;
    wazoo_zk_types_zk_error_t err;
    if (!wazoo_zk_watch_get_children_watch(&p, &ok, &err))
        return from_zk(&err);
    take_names(&ok.f0, out);
    keep_watcher(ok.f2, watcher);
    return WZ_OK;
}

int wz_wait_on(wz_watcher watcher, wz_deadline deadline, bool *deleted) {
    if (deleted)
        *deleted = false;
    if (watcher.handle == 0)
        return wz_fail(WZ_INVALID_ARGUMENT, "wz_wait_on: a zeroed watcher holds no watch");
    uint64_t buf;
    if (wz_deadline_left(deadline, &buf, NULL) == WZ_TIMEOUT)
        return WZ_TIMEOUT;
    wazoo_zk_watch_own_watcher_t own = {watcher.handle};
    wazoo_zk_types_watch_event_t event;
    wazoo_zk_types_zk_error_t err;
    if (!wazoo_zk_watch_method_watcher_changed(wazoo_zk_watch_borrow_watcher(own), timeout_of(deadline, &buf),
                                               &event, &err))
        return from_zk(&err);
    if (deleted)
        *deleted = event.kind == WAZOO_ZK_TYPES_EVENT_KIND_NODE_DELETED;
    wazoo_zk_types_watch_event_free(&event);
    return WZ_OK;
}

void wz_watcher_drop(wz_watcher *watcher) {
    if (watcher->handle) {
        wazoo_zk_watch_watcher_drop_own((wazoo_zk_watch_own_watcher_t){watcher->handle});
        watcher->handle = 0;
    }
}

int wz_exists_watch_wait(const char *path, bool want_exists, wz_deadline deadline) {
    for (;;) {
        int exists;
        wz_watcher watcher;
        int rc = wz_exists_watch(path, &exists, NULL, &watcher);
        if (rc != WZ_OK)
            return rc;
        if ((exists != 0) == want_exists) {
            wz_watcher_drop(&watcher);
            return WZ_OK;
        }
        rc = wz_wait_on(watcher, deadline, NULL);
        wz_watcher_drop(&watcher);
        if (rc != WZ_OK)
            return rc;
    }
}

int wz_wait_for_change(const char *path, wz_deadline deadline) {
    recipe_string_t p = str(path);
    uint64_t buf;
    wazoo_zk_types_zk_error_t err;
    if (!wazoo_zk_watch_wait_for_change(&p, timeout_of(deadline, &buf), &err))
        return from_zk(&err);
    return WZ_OK;
}

int wz_wait_for_predecessor(const char *dir, const char *our_name, wz_deadline deadline) {
    for (;;) {
        wz_names children;
        int rc = wz_get_children(dir, &children);
        if (rc != WZ_OK)
            return rc;
        wz_sort_by_sequence(&children);
        ptrdiff_t index = wz_names_find(&children, our_name);
        if (index < 0) {
            wz_names_free(&children);
            return wz_fail(WZ_NO_NODE, "%s/%s is gone", dir, our_name);
        }
        if (index == 0) {
            wz_names_free(&children);
            return WZ_OK;
        }
        char *before = wz_join(dir, children.names[index - 1]);
        wz_names_free(&children);
        rc = wz_deadline_left(deadline, NULL, NULL);
        if (rc == WZ_OK)
            rc = wz_wait_for_change(before, deadline);
        free(before);
        if (rc != WZ_OK)
            return rc;
    }
}

int wz_wait_any(const wz_watcher *watchers, size_t n, wz_deadline deadline, size_t *fired,
                bool *deleted) {
    if (fired)
        *fired = 0;
    if (deleted)
        *deleted = false;
    if (n == 0)
        return wz_fail(WZ_INVALID_ARGUMENT, "wz_wait_any: no watchers to wait on");
    for (size_t i = 0; i < n; i++)
        if (watchers[i].handle == 0)
            return wz_fail(WZ_INVALID_ARGUMENT, "wz_wait_any: watcher %zu is zeroed", i);
    wazoo_zk_watch_borrow_watcher_t *borrowed = xmalloc(n * sizeof *borrowed);
    for (size_t i = 0; i < n; i++)
        borrowed[i] = wazoo_zk_watch_borrow_watcher((wazoo_zk_watch_own_watcher_t){watchers[i].handle});
    wazoo_zk_watch_list_borrow_watcher_t list = {borrowed, n};
    uint64_t buf;
    wazoo_zk_watch_tuple2_u32_watch_event_t ok;
    wazoo_zk_types_zk_error_t err;
    bool done = wazoo_zk_watch_wait_any(&list, timeout_of(deadline, &buf), &ok, &err);
    free(borrowed);
    if (!done)
        return from_zk(&err);
    if (fired)
        *fired = ok.f0;
    if (deleted)
        *deleted = ok.f1.kind == WAZOO_ZK_TYPES_EVENT_KIND_NODE_DELETED;
    wazoo_zk_types_watch_event_free(&ok.f1);
    return WZ_OK;
}

/* ---- Contending for a turn --------------------------------------------------------------- */

wz_rule wz_rule_exclusive(const char *const *order, size_t order_len) {
    return (wz_rule){order, order_len, WZ_BLOCKED_BY_ANY, NULL, 0, WZ_WATCH_NEAREST};
}

/* Borrowed views of `n` C strings, for an import (free the array only). */
static recipe_string_t *strs(const char *const *texts, size_t n) {
    recipe_string_t *out = xmalloc(n * sizeof *out);
    for (size_t i = 0; i < n; i++)
        out[i] = str(texts[i]);
    return out;
}

int wz_contend(const char *dir, int naming, const char *name, const void *data, size_t len,
               const wz_rule *rule, wz_deadline deadline, char **node, int64_t *czxid) {
    if (node)
        *node = NULL;
    if (naming != WZ_NAMED_PROTECTED && naming != WZ_NAMED_KAZOO)
        return wz_fail(WZ_INVALID_ARGUMENT, "naming %d is neither WZ_NAMED_PROTECTED nor WZ_NAMED_KAZOO",
                       naming);
    if (rule->blocked_by < WZ_BLOCKED_BY_ANY || rule->blocked_by > WZ_BLOCKED_BY_SEQUENCED)
        return wz_fail(WZ_INVALID_ARGUMENT, "blocked_by %d is none of WZ_BLOCKED_BY_…", rule->blocked_by);
    if (rule->watch != WZ_WATCH_NEAREST && rule->watch != WZ_WATCH_FIRST)
        return wz_fail(WZ_INVALID_ARGUMENT, "watch %d is neither WZ_WATCH_NEAREST nor WZ_WATCH_FIRST",
                       rule->watch);
    recipe_string_t d = str(dir);
    wazoo_zk_contention_naming_t how;
    how.tag = (uint8_t)naming;
    if (naming == WZ_NAMED_PROTECTED)
        how.val.protected_ = str(name);
    else
        how.val.kazoo = str(name);
    recipe_list_u8_t b = bytes(data, len);
    recipe_string_t *order = strs(rule->order, rule->order_len);
    size_t blockers_len = rule->blocked_by == WZ_BLOCKED_BY_ANY ? 0 : rule->blockers_len;
    recipe_string_t *blockers = strs(rule->blockers, blockers_len);
    wazoo_zk_contention_rule_t r;
    r.order = (recipe_list_string_t){order, rule->order_len};
    r.blockers.tag = (uint8_t)rule->blocked_by;
    if (rule->blocked_by == WZ_BLOCKED_BY_CONTAINING)
        r.blockers.val.containing = (recipe_list_string_t){blockers, blockers_len};
    else if (rule->blocked_by == WZ_BLOCKED_BY_SEQUENCED)
        r.blockers.val.sequenced = (recipe_list_string_t){blockers, blockers_len};
    r.pick = (wazoo_zk_contention_pick_t)rule->watch;
    uint64_t buf;
    wazoo_zk_types_created_t ok;
    wazoo_zk_types_zk_error_t err;
    bool done = wazoo_zk_contention_contend(&d, &how, &b, &r, timeout_of(deadline, &buf), &ok, &err);
    free(order);
    free(blockers);
    if (!done)
        return from_zk(&err);
    if (czxid)
        *czxid = ok.stat.czxid;
    if (node)
        *node = take(&ok.path);
    else
        recipe_string_free(&ok.path);
    return WZ_OK;
}
