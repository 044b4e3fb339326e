# Sourced by scripts/test: what a test run leaves behind. A run marks every
# process it starts with MCPMUX_TEST_RUN (inherited through the environment,
# and passed on by the tests' Node clients, which strip the rest), and
# builds its binaries under MCPMUX_TEST_TMP (so a process started with an
# environment stripped further still names that folder in its command
# line). Linux only (/proc); elsewhere the process check is skipped.

# run_processes ID DIR: the processes of run ID, one "PID COMMAND LINE" a
# line: those whose environment carries MCPMUX_TEST_RUN=ID, or whose
# command line names DIR. The caller's own shell and its parents are not
# counted.
run_processes() {
	local id=$1 dir=$2 p pid cmd
	[ -d /proc/self ] || return 0
	for p in /proc/[0-9]*; do
		pid=${p#/proc/}
		[ "$pid" != "$$" ] && [ "$pid" != "$BASHPID" ] || continue
		cmd=$({ tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null) || continue
		[ -n "$cmd" ] || continue # a kernel thread, or gone
		if { tr '\0' '\n' <"$p/environ"; } 2>/dev/null | grep -qxF "MCPMUX_TEST_RUN=$id" ||
			{ [ -n "$dir" ] && [[ "$cmd" == *"$dir/"* ]]; }; then
			echo "$pid $cmd"
		fi
	done
}

# leftovers ID DIR WAIT: the processes of run ID still there after up to
# WAIT seconds (those that are exiting get that long), printed; returns 1
# when an mcpmux process (a daemon, a connect, a reaper) is among them.
# Others (a server an mcpmux left) are printed too, for the report.
leftovers() {
	local id=$1 dir=$2 wait=$3 left i
	for ((i = 0; i <= wait * 2; i++)); do
		left=$(run_processes "$id" "$dir")
		[ -n "$left" ] || return 0
		sleep 0.5
	done
	echo "$left"
	! grep -qE '^[0-9]+ [^ ]*mcpmux[^ /]* ' <<<"$left"
}

# state_snapshot DIR...: every file and folder under each DIR, with its size
# and modification time, sorted; nothing for a DIR that does not exist.
state_snapshot() {
	local d
	for d in "$@"; do
		[ -e "$d" ] || continue
		find "$d" -printf '%p\t%y\t%s\t%T@\n' 2>/dev/null
	done | sort
}

# account_state_dirs: the account's own state folders of mcpmux: under the
# account's home (from passwd, as mcpmux falls back to), under $HOME, and
# under $XDG_STATE_HOME when set: what the run must not touch.
account_state_dirs() {
	local home
	home=$(getent passwd "$(id -u)" 2>/dev/null | cut -d: -f6) || true
	printf '%s\n' ${home:+"$home/.local/state/mcpmux"} ${HOME:+"$HOME/.local/state/mcpmux"} \
		${XDG_STATE_HOME:+"$XDG_STATE_HOME/mcpmux"} | sort -u
}
