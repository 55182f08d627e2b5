// The original destination of a TCP connection that nftables REDIRECTed to this process:
// getsockopt(SOL_IP, SO_ORIGINAL_DST) on the accepted socket's fd, which node has no API for.
// Node-API only (no V8, no libuv symbols), so the built module loads in any Node version
// with Node-API 8 or later: it is built once with the C compiler and node's headers.
#define NAPI_VERSION 8
#include <node_api.h>
#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter_ipv4.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

static const char *errno_code(int e) {
  switch (e) {
    case ENOENT: return "ENOENT";   /* no conntrack entry: not a redirected connection */
    case EBADF: return "EBADF";
    case ENOTSOCK: return "ENOTSOCK";
    case ENOPROTOOPT: return "ENOPROTOOPT";
    case EINVAL: return "EINVAL";
    default: return "EIO";
  }
}

static napi_value throw_errno(napi_env env, int e) {
  napi_value code, msg, err;
  napi_create_string_utf8(env, errno_code(e), NAPI_AUTO_LENGTH, &code);
  napi_create_string_utf8(env, strerror(e), NAPI_AUTO_LENGTH, &msg);
  napi_create_error(env, code, msg, &err);
  napi_throw(env, err);
  return NULL;
}

/* originalDst(fd: number): { address: string, port: number } */
static napi_value original_dst(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  int32_t fd;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 || napi_get_value_int32(env, argv[0], &fd) != napi_ok || fd < 0) {
    napi_throw_type_error(env, "EINVAL", "originalDst(fd): fd must be a socket's file descriptor");
    return NULL;
  }
  struct sockaddr_in addr;
  socklen_t len = sizeof addr;
  memset(&addr, 0, sizeof addr);
  if (getsockopt(fd, SOL_IP, SO_ORIGINAL_DST, &addr, &len) != 0) return throw_errno(env, errno);
  char ip[INET_ADDRSTRLEN];
  if (inet_ntop(AF_INET, &addr.sin_addr, ip, sizeof ip) == NULL) return throw_errno(env, errno);
  napi_value result, address, port;
  napi_create_object(env, &result);
  napi_create_string_utf8(env, ip, NAPI_AUTO_LENGTH, &address);
  napi_create_uint32(env, ntohs(addr.sin_port), &port);
  napi_set_named_property(env, result, "address", address);
  napi_set_named_property(env, result, "port", port);
  return result;
}

NAPI_MODULE_INIT() {
  napi_value fn;
  napi_create_function(env, "originalDst", NAPI_AUTO_LENGTH, original_dst, NULL, &fn);
  napi_set_named_property(env, exports, "originalDst", fn);
  return exports;
}
