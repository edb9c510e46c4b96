require ["fileinto", "imap4flags"];
if address :is ["to","cc"] "sales-list@corp.example" { fileinto "Lists/sales"; stop; }
if address :is ["to","cc"] "finance-list@corp.example" { fileinto "Lists/finance"; stop; }
if address :is ["to","cc"] "hr-list@corp.example" { fileinto "Lists/hr"; stop; }
if address :is ["to","cc"] "legal-list@corp.example" { fileinto "Lists/legal"; stop; }
if address :is ["to","cc"] "it-list@corp.example" { fileinto "Lists/it"; stop; }
if address :is ["to","cc"] "ops-list@corp.example" { fileinto "Lists/ops"; stop; }
if address :is ["to","cc"] "support-list@corp.example" { fileinto "Lists/support"; stop; }
if address :is ["to","cc"] "marketing-list@corp.example" { fileinto "Lists/marketing"; stop; }
if address :is ["to","cc"] "eng-list@corp.example" { fileinto "Lists/eng"; stop; }
if address :is ["to","cc"] "exec-list@corp.example" { fileinto "Lists/exec"; stop; }
if header :contains "subject" "[project-0]" { fileinto :flags "$Project0" "Projects/p0"; }
if header :contains "subject" "[project-1]" { fileinto :flags "$Project1" "Projects/p1"; }
if header :contains "subject" "[project-2]" { fileinto :flags "$Project2" "Projects/p2"; }
if header :contains "subject" "[project-3]" { fileinto :flags "$Project3" "Projects/p3"; }
if header :contains "subject" "[project-4]" { fileinto :flags "$Project4" "Projects/p4"; }
if header :contains "subject" "[project-5]" { fileinto :flags "$Project5" "Projects/p5"; }
if header :contains "subject" "[project-6]" { fileinto :flags "$Project6" "Projects/p6"; }
if header :contains "subject" "[project-7]" { fileinto :flags "$Project7" "Projects/p7"; }
if header :contains "subject" "[project-8]" { fileinto :flags "$Project8" "Projects/p8"; }
if header :contains "subject" "[project-9]" { fileinto :flags "$Project9" "Projects/p9"; }
if address :domain :is "from" "partner0.example" { addflag "$Partner"; fileinto "Partners/partner0"; }
if address :domain :is "from" "partner1.example" { addflag "$Partner"; fileinto "Partners/partner1"; }
if address :domain :is "from" "partner2.example" { addflag "$Partner"; fileinto "Partners/partner2"; }
if address :domain :is "from" "partner3.example" { addflag "$Partner"; fileinto "Partners/partner3"; }
if address :domain :is "from" "partner4.example" { addflag "$Partner"; fileinto "Partners/partner4"; }
if address :domain :is "from" "partner5.example" { addflag "$Partner"; fileinto "Partners/partner5"; }
if address :domain :is "from" "partner6.example" { addflag "$Partner"; fileinto "Partners/partner6"; }
if address :domain :is "from" "partner7.example" { addflag "$Partner"; fileinto "Partners/partner7"; }
if address :domain :is "from" "partner8.example" { addflag "$Partner"; fileinto "Partners/partner8"; }
if address :domain :is "from" "partner9.example" { addflag "$Partner"; fileinto "Partners/partner9"; }
if allof (header :matches "subject" "*invoice*0*", address :localpart :is "from" "billing") { fileinto "Invoices"; }
if allof (header :matches "subject" "*invoice*1*", address :localpart :is "from" "billing") { fileinto "Invoices"; }
if allof (header :matches "subject" "*invoice*2*", address :localpart :is "from" "billing") { fileinto "Invoices"; }
if allof (header :matches "subject" "*invoice*3*", address :localpart :is "from" "billing") { fileinto "Invoices"; }
if allof (header :matches "subject" "*invoice*4*", address :localpart :is "from" "billing") { fileinto "Invoices"; }
if allof (header :matches "subject" "*invoice*5*", address :localpart :is "from" "billing") { fileinto "Invoices"; }
if allof (header :matches "subject" "*invoice*6*", address :localpart :is "from" "billing") { fileinto "Invoices"; }
if allof (header :matches "subject" "*invoice*7*", address :localpart :is "from" "billing") { fileinto "Invoices"; }
if allof (header :matches "subject" "*invoice*8*", address :localpart :is "from" "billing") { fileinto "Invoices"; }
if allof (header :matches "subject" "*invoice*9*", address :localpart :is "from" "billing") { fileinto "Invoices"; }
if header :is "X-Mailer" "bulkmailer-0" { fileinto "Bulk"; }
if header :is "X-Mailer" "bulkmailer-1" { fileinto "Bulk"; }
if header :is "X-Mailer" "bulkmailer-2" { fileinto "Bulk"; }
if header :is "X-Mailer" "bulkmailer-3" { fileinto "Bulk"; }
if header :is "X-Mailer" "bulkmailer-4" { fileinto "Bulk"; }
if exists "X-Spam-Flag" { fileinto "Junk"; stop; }
if header :contains "X-Priority" "1" { addflag "\\Flagged"; }
if size :over 5M { fileinto "Large"; }
if address :is "from" "ceo@corp.example" { addflag "\\Flagged"; keep; }
if header :contains "List-Id" "announce" { fileinto "Announce"; }
