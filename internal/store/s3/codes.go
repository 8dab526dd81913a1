package s3

// codes are the error codes S3 and S3-compatible stores (MinIO's X-Minio
// ones included) answer with, and those minio-go makes up from a status
// when a response has no body. Any other code is text the endpoint chose,
// and shown as no code: it could carry what the endpoint wants shown.
var codes = map[string]bool{}

func init() {
	for _, c := range []string{
		"AccessDenied", "AccountProblem", "AllAccessDisabled", "AuthorizationHeaderMalformed",
		"BadDigest", "BadRequest", "BucketAlreadyExists", "BucketAlreadyOwnedByYou", "Conflict",
		"EntityTooLarge", "EntityTooSmall", "ExpiredToken", "IllegalLocationConstraintException",
		"IncompleteBody", "InternalError", "InvalidAccessKeyId", "InvalidArgument", "InvalidBucketName",
		"InvalidBucketState", "InvalidDigest", "InvalidObjectName", "InvalidObjectState", "InvalidPart",
		"InvalidRange", "InvalidRegion", "InvalidRequest", "InvalidSecurity", "InvalidToken",
		"KeyTooLongError", "MalformedXML", "MethodNotAllowed", "MissingContentLength",
		"MissingSecurityHeader", "NoSuchBucket", "NoSuchKey", "NoSuchUpload", "NoSuchVersion",
		"NotImplemented", "NotModified", "OperationAborted", "PermanentRedirect", "PreconditionFailed",
		"Redirect", "RequestIsNotMultiPartContent", "RequestTimeTooSkewed", "RequestTimeout",
		"ServiceUnavailable", "SignatureDoesNotMatch", "SlowDown", "TemporaryRedirect",
		"TokenRefreshRequired", "TooManyBuckets", "UnexpectedContent", "XAmzContentSHA256Mismatch",
		"XMinioServerNotInitialized", "XMinioStorageFull",
	} {
		codes[c] = true
	}
}

// knownCode returns code if it is one of codes, else "".
func knownCode(code string) string {
	if codes[code] {
		return code
	}
	return ""
}
