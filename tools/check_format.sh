#!/usr/bin/env bash
# Checks that every tracked C++ file follows .clang-format (clang-format-14).
# Prints the files that do not and exits 1; fix them with
#   clang-format-14 -i $(git ls-files '*.cc' '*.h' '*.cu')
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
CLANG_FORMAT=${CLANG_FORMAT:-clang-format-14}
command -v "$CLANG_FORMAT" >/dev/null || { echo "check_format: $CLANG_FORMAT not found" >&2; exit 2; }
bad=()
while IFS= read -r f; do
  "$CLANG_FORMAT" --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done < <(git ls-files '*.cc' '*.h' '*.cu')
if ((${#bad[@]})); then
  echo "check_format: ${#bad[@]} file(s) not formatted: ${bad[*]}" >&2
  exit 1
fi
echo "check_format: $(git ls-files '*.cc' '*.h' '*.cu' | wc -l) files formatted"
