package mailtest

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
)

// postfixServices is master.cf: the SMTP listener, the submission listener
// (AUTH against dovecot's passwords required, and a user may send only as
// itself), and the internal services that take a mail into a Maildir, none
// chrooted.
const postfixServices = `%s inet n - n - - smtpd
%s inet n - n - - smtpd
  -o smtpd_sasl_auth_enable=yes
  -o smtpd_sasl_type=dovecot
  -o smtpd_sasl_path=%s
  -o smtpd_client_restrictions=permit_sasl_authenticated,reject
  -o smtpd_sender_restrictions=reject_sender_login_mismatch
  -o smtpd_sender_login_maps=texthash:%s
pickup    unix  n - n 60   1 pickup
cleanup   unix  n - n -    0 cleanup
qmgr      unix  n - n 300  1 qmgr
rewrite   unix  - - n -    - trivial-rewrite
bounce    unix  - - n -    0 bounce
defer     unix  - - n -    0 bounce
trace     unix  - - n -    0 bounce
verify    unix  - - n -    1 verify
flush     unix  n - n 1000? 0 flush
proxymap  unix  - - n -    - proxymap
smtp      unix  - - n -    - smtp
relay     unix  - - n -    - smtp
showq     unix  n - n -    - showq
error     unix  - - n -    - error
retry     unix  - - n -    - error
discard   unix  - - n -    - discard
local     unix  - n n -    - local
virtual   unix  - n n -    - virtual
anvil     unix  - - n -    1 anvil
scache    unix  - - n -    1 scache
postlog   unix-dgram n - n - 1 postlogd
`

func (s *Server) writePostfix(o Options, port, submission int) error {
	for _, d := range []string{"postfix", "queue", "data", "mail"} {
		if err := os.MkdirAll(s.path(d), 0o755); err != nil {
			return err
		}
	}
	if err := os.Chown(s.path("mail"), mailUID, mailUID); err != nil {
		return err
	}
	var domains []string
	var boxes, logins strings.Builder
	for _, u := range o.Users {
		local, domain, ok := strings.Cut(u, "@")
		if !ok {
			return fmt.Errorf("mailtest: user %q: want local@domain", u)
		}
		if !slices.Contains(domains, domain) {
			domains = append(domains, domain)
		}
		fmt.Fprintf(&boxes, "%s %s/%s/Maildir/\n", u, domain, local)
		fmt.Fprintf(&logins, "%s %s\n", u, u)
	}
	var verdicts strings.Builder
	for sender, v := range o.Verdicts {
		fmt.Fprintf(&verdicts, "%s PREPEND Authentication-Results: %s; %s\n", sender, AuthservID, v)
	}
	mainCF := fmt.Sprintf(`compatibility_level = 3.6
queue_directory = %[1]s/queue
data_directory = %[1]s/data
command_directory = /usr/sbin
daemon_directory = /usr/lib/postfix/sbin
meta_directory = /etc/postfix
shlib_directory = /usr/lib/postfix
mail_owner = postfix
setgid_group = postdrop
maillog_file = /dev/stdout
myhostname = %[2]s
mydomain = test
myorigin = %[2]s
mydestination =
relayhost =
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
mynetworks = 127.0.0.0/8
smtputf8_enable = no
biff = no
append_dot_mydomain = no
virtual_mailbox_domains = %[3]s
virtual_mailbox_base = %[1]s/mail
virtual_mailbox_maps = texthash:%[1]s/postfix/mailboxes
virtual_uid_maps = static:%[4]d
virtual_gid_maps = static:%[4]d
virtual_minimum_uid = 100
smtpd_sender_restrictions = check_sender_access texthash:%[1]s/postfix/verdicts
`, s.dir, AuthservID, strings.Join(domains, " "), mailUID)
	files := map[string]string{
		"main.cf": mainCF,
		"master.cf": fmt.Sprintf(postfixServices, fmt.Sprintf("127.0.0.1:%d", port), fmt.Sprintf("127.0.0.1:%d", submission),
			s.path("dovecot", "run", "auth-postfix"), s.path("postfix", "logins")),
		"mailboxes": boxes.String(),
		"logins":    logins.String(),
		"verdicts":  verdicts.String(),
	}
	for name, body := range files {
		if err := os.WriteFile(s.path("postfix", name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	// post-install makes the queue's dirs with the owners and modes postfix checks.
	cmd := exec.Command("/usr/lib/postfix/sbin/post-install", "config_directory="+s.path("postfix"), "meta_directory=/etc/postfix",
		"queue_directory="+s.path("queue"), "data_directory="+s.path("data"), "daemon_directory=/usr/lib/postfix/sbin",
		"command_directory=/usr/sbin", "mail_owner=postfix", "setgid_group=postdrop", "create-missing")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("mailtest: postfix post-install: %w\n%s", err, out)
	}
	return exec.Command("chown", "postfix", s.path("data")).Run()
}

func (s *Server) writeDovecot(o Options) error {
	if err := os.MkdirAll(s.path("dovecot"), 0o755); err != nil {
		return err
	}
	conf := fmt.Sprintf(`base_dir = %[1]s/dovecot/run
state_dir = %[1]s/dovecot/state
instance_name = mailtest-%[2]d
protocols = imap
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
log_path = %[1]s/dovecot.log
mail_location = maildir:%[1]s/mail/%%d/%%n/Maildir
first_valid_uid = 100
passdb {
  driver = passwd-file
  args = scheme=PLAIN %[1]s/dovecot/users
}
userdb {
  driver = static
  args = uid=%[3]d gid=%[3]d home=%[1]s/mail/%%d/%%n
}
service imap-login {
  inet_listener imap {
    address = 127.0.0.1
    port = %[2]d
  }
  inet_listener imaps {
    port = 0
  }
  chroot =
}
service anvil {
  chroot =
}
service auth {
  unix_listener auth-postfix {
    mode = 0660
    user = postfix
    group = postfix
  }
}
`, s.dir, s.imapPort, mailUID)
	if o.NoIdle {
		conf += "imap_capability = IMAP4rev1 SASL-IR LOGIN-REFERRALS ID ENABLE LITERAL+ UIDPLUS\n"
	}
	var users strings.Builder
	for _, u := range o.Users {
		fmt.Fprintf(&users, "%s:{PLAIN}%s\n", u, Password)
	}
	if err := os.WriteFile(s.path("dovecot", "users"), []byte(users.String()), 0o644); err != nil {
		return err
	}
	if err := os.MkdirAll(s.path("dovecot", "state"), 0o755); err != nil {
		return err
	}
	return os.WriteFile(s.path("dovecot", "dovecot.conf"), []byte(conf), 0o644)
}
