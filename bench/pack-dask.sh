#!/usr/bin/env bash
# Packs this machine's Debian Python with Dask, Zarr and NumPy into one relocatable tree, so that
# bench/storage.sh can hold pbench to Dask on a host that has no Dask of its own (the GPU hosts:
# their python3 is another release, and Debian's packages are built for 3.11):
#   bench/pack-dask.sh OUT_DIR
# OUT_DIR/bin/python runs Debian's /usr/bin/python3 with its standard library, the dist-packages
# that `import dask.array, zarr, numcodecs` loads, and every shared library those need other than
# the C library's own (the host's glibc must be as new as this machine's). Then, on the host:
#   DASK_PYTHON=OUT_DIR/bin/python bench/storage.sh BIN_DIR [GB]
# Needs deploy/install-deps.sh --test here (python3-dask, python3-zarr, python3-numcodecs).
set -euo pipefail
out=${1:?usage: bench/pack-dask.sh OUT_DIR}
py=/usr/bin/python3
exe=$(readlink -f "$py")
ver=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/usr/bin" "$out/usr/lib/python3/dist-packages"
out=$(cd "$out" && pwd)

# The dist-packages entries (packages and single modules) that Dask's array sum over Zarr and
# npy stacks loads, found by loading them, not listed by hand.
mapfile -t entries < <("$py" - <<'PY'
import sys
import dask, dask.array as da, zarr, numcodecs, numcodecs.blosc, numcodecs.zstd, numcodecs.lz4
float(da.ones((4, 4), chunks=2).sum().compute(scheduler="threads"))
root = "/usr/lib/python3/dist-packages/"
tops = {m.__file__[len(root):].split("/")[0] for m in list(sys.modules.values())
        if (getattr(m, "__file__", None) or "").startswith(root)}
print("\n".join(sorted(tops)))
PY
)
(cd /usr/lib/python3/dist-packages && tar -cf - --exclude=__pycache__ --exclude=tests "${entries[@]}") |
  tar -xf - -C "$out/usr/lib/python3/dist-packages"
(cd /usr/lib && tar -cf - --exclude=__pycache__ --exclude="python$ver/test" --exclude="python$ver/idlelib" \
  --exclude="python$ver/tkinter" --exclude="python$ver/lib2to3" --exclude="python$ver/ensurepip" \
  --exclude="python$ver/pydoc_data" "python$ver") | tar -xf - -C "$out/usr/lib"
cp "$exe" "$out/usr/bin/"

# Shared libraries the interpreter and the extension modules load, less the C library's own.
glibc='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libutil|libresolv)\.so'
{ echo "$exe"; find "$out/usr/lib" -name '*.so*' -type f; } | xargs ldd 2>/dev/null |
  awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | sort -u | while read -r soname path; do
    [[ $soname =~ $glibc ]] || cp -L "$path" "$out/lib/$soname"
  done

cat >"$out/bin/python" <<EOF
#!/bin/sh
# Debian's Python $ver with Dask, packed by bench/pack-dask.sh: its own prefix and libraries.
here=\$(cd "\$(dirname "\$0")/.." && pwd)
PYTHONHOME=\$here/usr PYTHONNOUSERSITE=1 PYTHONDONTWRITEBYTECODE=1 \\
  LD_LIBRARY_PATH=\$here/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH} exec "\$here/usr/bin/$(basename "$exe")" "\$@"
EOF
chmod +x "$out/bin/python"
"$out/bin/python" -c 'import sys, dask.array, zarr
assert all(p.startswith(sys.argv[1]) for p in sys.path if p), sys.path
print("packed: Python", sys.version.split()[0], "dask", dask.__version__, "zarr", zarr.__version__)' "$out"
du -sh "$out"
