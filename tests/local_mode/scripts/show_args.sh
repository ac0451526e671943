#!/bin/sh
# Test entry point (shell): prints its arguments one per line and writes a checkpoint marker.
for arg in "$@"; do echo "arg: $arg"; done
echo "$SM_CURRENT_HOST" > "$SAGEMAKER_BASE_DIR/checkpoints/marker-$SM_CURRENT_HOST"
