#!/bin/bash
# Capacity, round 3: the registered-buffer job (bank-buffer) at 300 MiB.
sed -e 's/^dqn-prealloc 520$/bank-buffer 300/' -e '/^dataset-before 520$/d' -e '/^teacher-before 300$/d' -e '/^emb-cache 300$/d' -e 's/^# Capacity checks:/# Capacity checks, round 3 (bank-buffer):/' run_capacity.sh > /tmp/run_capacity3_body.sh
bash /tmp/run_capacity3_body.sh
